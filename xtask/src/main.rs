fn main() {
    eprintln!("xtask: work in progress");
}
