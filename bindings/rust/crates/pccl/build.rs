//! Adds an rpath to libpccl's directory (found by pccl-sys, passed as DEP_PCCL_LIB_DIR) to
//! this package's tests and examples, so they run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_PCCL_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_PCCL_LIB_DIR") {
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir);
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{}", dir);
    }
}
