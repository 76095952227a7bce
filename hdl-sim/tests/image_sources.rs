//! The SoC model's loader refuses a firmware image not built from the checkout's sources
//! (`elf2img::sources::compare`, which `Soc::new` runs on this checkout; `tests/soc.rs`
//! has it refuse through `Soc::new`): on a copy of this checkout's image sources with a
//! record written as `make-images.sh` writes it, then with one byte of one source
//! changed, a source added, and no record. Needs no SoC model.

use elf2img::sources::{self, compare, Change, ImageError, Sources};
use roce_hdl_sim::soc::checkout;
use std::fs;
use std::path::PathBuf;

/// A copy of the checkout's image sources under a fresh temporary directory, removed on
/// drop, with an "image" and its record as `make-images.sh` leaves them.
struct Copy {
    root: PathBuf,
    image: PathBuf,
}

impl Copy {
    fn new(name: &str) -> Self {
        let root = std::env::temp_dir().join(format!("roce-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        for rel in sources::files(checkout()).unwrap() {
            let to = root.join(&rel);
            fs::create_dir_all(to.parent().unwrap()).unwrap();
            fs::copy(checkout().join(&rel), &to).unwrap();
        }
        let image = root.join("firmware/image/target/images/softcore/firmware.hex");
        fs::create_dir_all(image.parent().unwrap()).unwrap();
        fs::write(&image, "00000013\n").unwrap();
        let record = Sources::of(&root).unwrap().to_text();
        fs::write(sources::record_path(&image), record).unwrap();
        Self { root, image }
    }

    fn check(&self) -> Result<(), ImageError> {
        compare(&self.root, &self.image)
    }

    /// Inverts byte `at` of the file `rel` (twice restores it).
    fn flip(&self, rel: &str, at: usize) {
        let path = self.root.join(rel);
        let mut bytes = fs::read(&path).unwrap();
        bytes[at] ^= 0xff;
        fs::write(&path, bytes).unwrap();
    }
}

impl Drop for Copy {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

fn changes(e: ImageError) -> Vec<Change> {
    match e {
        ImageError::Stale { changes, .. } => changes,
        other => panic!("not a stale image: {other}"),
    }
}

#[test]
fn an_image_of_the_sources_loads_and_one_changed_byte_refuses_it() {
    let copy = Copy::new("fresh-then-edited");
    copy.check().expect("the image of these very sources");

    let rel = "core/src/lib.rs";
    copy.flip(rel, 100);
    let err = copy.check().expect_err("a source changed");
    let text = err.to_string();
    assert!(
        text.contains("run firmware/image/make-images.sh")
            && text.contains("core/src/lib.rs changed"),
        "{text}"
    );
    assert_eq!(changes(err), [Change::Changed(rel.into())]);

    // The same bytes again (an undo, or a checkout of the same commit): the same sources.
    copy.flip(rel, 100);
    copy.check().expect("the sources are as recorded again");
}

#[test]
fn each_kind_of_input_is_in_the_record() {
    let copy = Copy::new("inputs");
    // A file of each kind the build reads: a firmware source, the image's manifest, its
    // lock file, the script, the converter, a core dependency.
    for rel in [
        "firmware/src/fastpath.rs",
        "firmware/image/Cargo.toml",
        "firmware/image/Cargo.lock",
        "firmware/image/make-images.sh",
        "firmware/image/tools/elf2img/src/main.rs",
        "crc32/src/lib.rs",
        "abi/src/lib.rs",
        "Cargo.toml",
    ] {
        // One byte more (a manifest stays one: the record reads their names).
        let path = copy.root.join(rel);
        let was = fs::read(&path).unwrap();
        fs::write(&path, [&was[..], b"\n"].concat()).unwrap();
        assert_eq!(
            changes(copy.check().expect_err(rel)),
            [Change::Changed(rel.into())]
        );
        fs::write(&path, was).unwrap();
    }
    copy.check().expect("all undone");
}

#[test]
fn a_new_source_file_refuses_the_image() {
    let copy = Copy::new("added");
    fs::write(copy.root.join("firmware/src/extra.rs"), "").unwrap();
    assert_eq!(
        changes(copy.check().unwrap_err()),
        [Change::Added("firmware/src/extra.rs".into())]
    );
}

#[test]
fn an_image_without_a_record_is_refused() {
    let copy = Copy::new("unrecorded");
    fs::remove_file(sources::record_path(&copy.image)).unwrap();
    match copy.check() {
        Err(e @ ImageError::Unknown { .. }) => {
            assert!(e.to_string().contains("make-images.sh"), "{e}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_path_dependency_missing_from_the_list_fails_the_record() {
    let copy = Copy::new("newdep");
    let lock = copy.root.join("firmware/image/Cargo.lock");
    let mut text = fs::read_to_string(&lock).unwrap();
    text.push_str("\n[[package]]\nname = \"roce-new\"\nversion = \"0.1.0\"\n");
    fs::write(&lock, text).unwrap();
    let err = Sources::of(&copy.root).unwrap_err();
    assert!(
        err.contains("roce-new") && err.contains("IMAGE_CRATES"),
        "{err}"
    );
}
