//! Finds libpccl and tells cargo how to link it.
//!
//! The library directory is, in order: `PCCL_LIB_DIR`; `PCCL_BUILD_DIR/bindings/libpccl`;
//! the first of `build/release`, `build` (relative to the repository root, two levels above
//! this workspace) whose `bindings/libpccl` holds `libpccl.so`; else the system's default
//! search path. An rpath to that directory is added to this package's tests, and the directory
//! is passed on to dependent build scripts as `DEP_PCCL_LIB_DIR` (the `pccl` crate adds the
//! rpath to its own tests and examples from it).
use std::env;
use std::path::{Path, PathBuf};

fn has_lib(dir: &Path) -> bool {
    dir.join("libpccl.so").exists() || dir.join("libpccl.dylib").exists()
}

fn find_lib_dir() -> Option<PathBuf> {
    if let Some(d) = env::var_os("PCCL_LIB_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(b) = env::var_os("PCCL_BUILD_DIR") {
        return Some(PathBuf::from(b).join("bindings").join("libpccl"));
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    // crates/pccl-sys -> crates -> rust -> bindings -> repository root
    let root = manifest.ancestors().nth(4)?.to_path_buf();
    for sub in ["build/release", "build"] {
        let d = root.join(sub).join("bindings").join("libpccl");
        if has_lib(&d) {
            return Some(d);
        }
    }
    None
}

fn main() {
    println!("cargo:rerun-if-env-changed=PCCL_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PCCL_BUILD_DIR");
    match find_lib_dir() {
        Some(dir) => {
            let dir = dir.canonicalize().unwrap_or(dir);
            if !has_lib(&dir) {
                println!("cargo:warning=libpccl not found in {}", dir.display());
            }
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
            println!("cargo:lib_dir={}", dir.display());
            println!("cargo:rustc-env=PCCL_SYS_LIB_DIR={}", dir.display());
        }
        None => {
            println!(
                "cargo:warning=libpccl not found: set PCCL_LIB_DIR (or PCCL_BUILD_DIR); \
                 linking against the system search path"
            );
        }
    }
    println!("cargo:rustc-link-lib=dylib=pccl");
}
