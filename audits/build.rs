//! Embeds every suite file of `suites/` in the binary (so `fl-audit run` works from any
//! directory) and records the compiler version for the report.

use std::{env, fs, path::Path, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=suites");
    let manifest = env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&manifest).join("suites");
    let mut files: Vec<_> = fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    let mut out = String::from("/// The built-in suite files: (file name, contents).\n");
    out.push_str("pub(crate) const BUILTIN_SUITES: &[(&str, &str)] = &[\n");
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        out.push_str(&format!(
            "    ({name:?}, include_str!({:?})),\n",
            f.display().to_string()
        ));
    }
    out.push_str("];\n");
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    out.push_str(&format!(
        "/// `rustc --version` of the compiler that built this binary.\npub(crate) const RUSTC_VERSION: &str = {version:?};\n"
    ));
    let out_dir = env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    if let Err(e) = fs::write(Path::new(&out_dir).join("builtin.rs"), out) {
        println!("cargo:warning=cannot write builtin.rs: {e}");
        std::process::exit(1);
    }
}
