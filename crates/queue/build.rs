//! Tells the dependency test (tests/dependencies.rs) the target it is built for.
fn main() {
    println!("cargo:rustc-env=TARGET_TRIPLE={}", std::env::var("TARGET").expect("cargo sets TARGET"));
}
