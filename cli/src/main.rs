fn main() {
    println!("roce: work in progress");
}
