//! Exposes a hash of the engine's own source files as `PACCP_SIM_SOURCE_HASH`, so result caches can
//! tell outputs of different engine code apart (the version number does not change with every fix).
use std::fs;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn main() {
    println!("cargo:rerun-if-changed=src");
    let mut files = Vec::new();
    rust_files(Path::new("src"), &mut files);
    files.sort();
    // FNV-1a (64 bit) over each file's relative path and contents.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for f in &files {
        let name = f.to_string_lossy().replace('\\', "/");
        let body = fs::read(f).unwrap_or_default();
        for b in name.bytes().chain([0u8]).chain(body).chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    println!("cargo:rustc-env=PACCP_SIM_SOURCE_HASH={h:016x}");
}
