//! Finds or builds libpccl and tells cargo how to link it.
//!
//! With the `bundled` feature: CMake (Debian's `cmake`) builds the static libpccl from this
//! repository's sources into `OUT_DIR` (tests and benchmarks off; `PCCL_SOURCE_DIR` names another
//! checkout), and it is linked statically with its system libraries (nng, libcrypto, pthreads,
//! libm) dynamically, as pcclConfig.cmake's `pccl::pccl_static` does. Nothing else is needed
//! beyond Debian's toolchain and `libnng-dev`, `libxxhash-dev`, `libssl-dev`.
//!
//! Without it, the shared libpccl is linked. Its directory is, in order: `PCCL_LIB_DIR`;
//! `PCCL_BUILD_DIR/bindings/libpccl` (explicit choices win); `pkg-config --libs pccl` (an
//! installed package: the `pkg-config` program, no crate); the first of `build/release`, `build`
//! (relative to the repository root, two levels above this workspace) whose `bindings/libpccl`
//! holds `libpccl.so`; else the system's default search path. An rpath to that directory is added
//! to this package's tests, and the directory is passed on to dependent build scripts as
//! `DEP_PCCL_LIB_DIR` (the `pccl` crate adds the rpath to its own tests and examples from it).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn has_lib(dir: &Path) -> bool {
    dir.join("libpccl.so").exists() || dir.join("libpccl.dylib").exists()
}

fn repo_root() -> Option<PathBuf> {
    if let Some(d) = env::var_os("PCCL_SOURCE_DIR") {
        return Some(PathBuf::from(d));
    }
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    // crates/pccl-sys -> crates -> rust -> bindings -> repository root
    Some(manifest.ancestors().nth(4)?.to_path_buf())
}

/// `-L` directories and `-l` names of `pkg-config --libs pccl`, or None when pkg-config or the
/// package is missing.
fn pkg_config() -> Option<(Vec<PathBuf>, Vec<String>)> {
    let prog = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(prog).args(["--libs", "pccl"]).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let mut dirs = Vec::new();
    let mut libs = Vec::new();
    for tok in String::from_utf8_lossy(&out.stdout).split_whitespace() {
        if let Some(d) = tok.strip_prefix("-L") {
            dirs.push(PathBuf::from(d));
        } else if let Some(l) = tok.strip_prefix("-l") {
            libs.push(l.to_string());
        }
    }
    Some((dirs, libs))
}

fn find_lib_dir() -> Option<PathBuf> {
    if let Some(d) = env::var_os("PCCL_LIB_DIR") {
        return Some(PathBuf::from(d));
    }
    if let Some(b) = env::var_os("PCCL_BUILD_DIR") {
        return Some(PathBuf::from(b).join("bindings").join("libpccl"));
    }
    let root = repo_root()?;
    for sub in ["build/release", "build"] {
        let d = root.join(sub).join("bindings").join("libpccl");
        if has_lib(&d) {
            return Some(d);
        }
    }
    None
}

fn use_lib_dir(dir: PathBuf) {
    let dir = dir.canonicalize().unwrap_or(dir);
    if !has_lib(&dir) {
        println!("cargo:warning=libpccl not found in {}", dir.display());
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
    println!("cargo:rustc-env=PCCL_SYS_LIB_DIR={}", dir.display());
}

fn run(cmd: &mut Command) {
    let st = cmd.status().unwrap_or_else(|e| {
        panic!(
            "pccl-sys: cannot run {:?}: {} (apt-get install cmake)",
            cmd, e
        )
    });
    assert!(st.success(), "pccl-sys: {:?} failed with {}", cmd, st);
}

fn build_bundled() {
    let root = repo_root().expect("pccl-sys: no repository root (set PCCL_SOURCE_DIR)");
    assert!(
        root.join("include").join("pccl.h").is_file(),
        "pccl-sys: {} is not the pccl repository (set PCCL_SOURCE_DIR)",
        root.display()
    );
    for d in [
        "include",
        "core",
        "transport",
        "bindings/libpccl",
        "master",
        "cmake",
        "schema",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(d).display());
    }
    println!(
        "cargo:rerun-if-changed={}",
        root.join("CMakeLists.txt").display()
    );
    let build = PathBuf::from(env::var_os("OUT_DIR").unwrap()).join("cmake-build");
    let mut conf = Command::new("cmake");
    conf.arg("-S").arg(&root).arg("-B").arg(&build).args([
        "-DCMAKE_BUILD_TYPE=Release",
        "-DPCCL_BUILD_TESTS=OFF",
        "-DPCCL_BUILD_BENCH=OFF",
    ]);
    // A tree configured once keeps its generator; only a fresh one chooses.
    let fresh = !build.join("CMakeCache.txt").exists();
    if fresh && Command::new("ninja").arg("--version").output().is_ok() {
        conf.args(["-G", "Ninja"]);
    }
    run(&mut conf);
    let jobs = env::var("NUM_JOBS").unwrap_or_else(|_| "2".to_string());
    run(Command::new("cmake").arg("--build").arg(&build).args([
        "--target",
        "pccl_static",
        "-j",
        &jobs,
    ]));
    let lib_dir = build.join("bindings").join("libpccl");
    println!("cargo:rustc-link-search=native={}", lib_dir.display());
    println!("cargo:rustc-link-lib=static=pccl");
    for l in ["nng", "crypto", "pthread", "m"] {
        println!("cargo:rustc-link-lib=dylib={}", l);
    }
    println!("cargo:include={}", root.join("include").display());
}

fn main() {
    println!("cargo:rerun-if-env-changed=PCCL_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PCCL_BUILD_DIR");
    println!("cargo:rerun-if-env-changed=PCCL_SOURCE_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    if env::var_os("CARGO_FEATURE_BUNDLED").is_some() {
        build_bundled();
        return;
    }
    let explicit = env::var_os("PCCL_LIB_DIR").is_some() || env::var_os("PCCL_BUILD_DIR").is_some();
    if !explicit {
        if let Some((dirs, libs)) = pkg_config() {
            for d in &dirs {
                if has_lib(d) {
                    use_lib_dir(d.clone());
                } else {
                    println!("cargo:rustc-link-search=native={}", d.display());
                }
            }
            for l in &libs {
                println!("cargo:rustc-link-lib=dylib={}", l);
            }
            return;
        }
    }
    match find_lib_dir() {
        Some(dir) => use_lib_dir(dir),
        None => {
            println!(
                "cargo:warning=libpccl not found: set PCCL_LIB_DIR (or PCCL_BUILD_DIR), install \
                 it (pkg-config pccl) or build with --features bundled; linking against the \
                 system search path"
            );
        }
    }
    println!("cargo:rustc-link-lib=dylib=pccl");
}
