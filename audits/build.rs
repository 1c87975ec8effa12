//! Embeds every suite file of `suites/` in the binary (so `fl-audit run` works from any
//! directory) and records the compiler version and the build identifier for the report
//! and the counts files.
//!
//! The build identifier says which source this binary was built from (a shard's counts
//! file records it, and `fl-audit merge` refuses shards of two builds):
//! - `FL_AUDIT_BUILD_ID` from the environment, when set (a packager's own identifier);
//! - in a git checkout that tracks this crate: `git:<commit>`, and for a tree that differs
//!   from the commit in the sources the binary is built from (this crate, the workspace
//!   crates it depends on, the workspace manifest and lock file; untracked files there
//!   included), `git:<commit>+dirty.<hash>` with a 64-bit FNV-1a hash of those changes, so
//!   two different dirty trees of one commit are two builds;
//! - from a packaged crate (`cargo package`, no git checkout of it): `git:<commit>` from
//!   the `.cargo_vcs_info.json` cargo writes into the package, marked `+packaged` (and
//!   `+dirty` when cargo says the tree was dirty);
//! - else `unknown`.

use std::{
    env, fs,
    path::{Path, PathBuf},
    process::Command,
};

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
    let build = build_id(Path::new(&manifest));
    out.push_str(&format!(
        "/// Which source this binary was built from (see `build.rs`).\npub(crate) const BUILD_ID: &str = {build:?};\n"
    ));
    let out_dir = env::var("OUT_DIR").unwrap_or_else(|_| ".".into());
    if let Err(e) = fs::write(Path::new(&out_dir).join("builtin.rs"), out) {
        println!("cargo:warning=cannot write builtin.rs: {e}");
        std::process::exit(1);
    }
}

/// The crates and files (relative to the workspace root) whose changes make the build
/// dirty: this crate, the workspace crates it is built from, the workspace manifest and
/// lock file.
const SOURCES: &[&str] = &[
    "audits",
    "crates/fl-ldp",
    "crates/fl-signds",
    "crates/fl-stats",
    "crates/fl-paillier",
    "Cargo.toml",
    "Cargo.lock",
];

/// The build identifier (see the module docs).
fn build_id(manifest: &Path) -> String {
    println!("cargo:rerun-if-env-changed=FL_AUDIT_BUILD_ID");
    if let Ok(id) = env::var("FL_AUDIT_BUILD_ID")
        && !id.trim().is_empty()
    {
        return id.trim().to_string();
    }
    git_build_id(manifest)
        .or_else(|| packaged_build_id(manifest))
        .unwrap_or_else(|| "unknown".into())
}

/// `git` in `dir` (never taking the index lock, so that a build never rewrites it); its
/// standard output when it succeeds.
fn git(dir: &Path, args: &[&str]) -> Option<Vec<u8>> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_OPTIONAL_LOCKS", "0")
        .output()
        .ok()?;
    out.status.success().then_some(out.stdout)
}

fn git_text(dir: &Path, args: &[&str]) -> Option<String> {
    let text = String::from_utf8(git(dir, args)?).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// The identifier of a git checkout that tracks this crate (`None` elsewhere, e.g. in a
/// packaged copy under an ignored `target/` of some other checkout).
fn git_build_id(manifest: &Path) -> Option<String> {
    git_text(manifest, &["ls-files", "--", "build.rs"])?;
    let root = PathBuf::from(git_text(manifest, &["rev-parse", "--show-toplevel"])?);
    let commit = git_text(manifest, &["rev-parse", "HEAD"])?;
    // Rebuild when HEAD moves or a source changes. Cargo reruns a build script on every
    // build while a watched path is missing, so only existing git files are watched:
    // `packed-refs` when the repository has one (when refs get packed later, the loose
    // ref watched below disappears, which reruns); the branch's loose ref, or — when the
    // ref is only packed — its directory under `refs/heads`, which sees a commit write it.
    let git_path =
        |what: &str| git_text(&root, &["rev-parse", "--git-path", what]).map(|p| root.join(p));
    for what in ["HEAD", "packed-refs"] {
        if let Some(p) = git_path(what).filter(|p| p.exists()) {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    if let Some(head) = git_text(&root, &["symbolic-ref", "-q", "HEAD"])
        && let Some(p) = git_path(&head)
    {
        let watched = if p.exists() {
            Some(p)
        } else {
            p.parent().filter(|d| d.exists()).map(Path::to_path_buf)
        };
        if let Some(w) = watched {
            println!("cargo:rerun-if-changed={}", w.display());
        }
    }
    // A crate's manifest, build script, sources, embedded suites and README (the crate
    // docs include it); not its tests, `target/` or caches. The same paths are watched
    // (rebuild when one changes) and compared with the commit, so the identifier is
    // never stale.
    let mut sources: Vec<String> = Vec::new();
    for s in SOURCES {
        if root.join(s).is_dir() {
            for sub in ["Cargo.toml", "build.rs", "src", "suites", "README.md"] {
                if root.join(s).join(sub).exists() {
                    sources.push(format!("{s}/{sub}"));
                }
            }
        } else if root.join(s).exists() {
            sources.push((*s).to_string());
        }
    }
    for s in &sources {
        println!("cargo:rerun-if-changed={}", root.join(s).display());
    }
    let mut args = vec!["diff", "HEAD", "--no-ext-diff", "--binary", "--"];
    args.extend(sources.iter().map(String::as_str));
    let diff = git(&root, &args)?;
    let mut others = vec!["ls-files", "--others", "--exclude-standard", "-z", "--"];
    others.extend(sources.iter().map(String::as_str));
    let untracked = git(&root, &others)?;
    if diff.is_empty() && untracked.is_empty() {
        return Some(format!("git:{commit}"));
    }
    let mut hash = Fnv::new();
    hash.add(&diff);
    for name in untracked.split(|&b| b == 0).filter(|n| !n.is_empty()) {
        hash.add(name);
        let path = root.join(String::from_utf8_lossy(name).as_ref());
        hash.add(&fs::read(&path).unwrap_or_default());
    }
    Some(format!("git:{commit}+dirty.{:016x}", hash.0))
}

/// The identifier of a packaged crate, from the `.cargo_vcs_info.json` `cargo package`
/// writes (`{"git": {"sha1": "…", "dirty": true}, "path_in_vcs": "…"}`).
fn packaged_build_id(manifest: &Path) -> Option<String> {
    let info = manifest.join(".cargo_vcs_info.json");
    println!("cargo:rerun-if-changed={}", info.display());
    let text = fs::read_to_string(info).ok()?;
    let sha = text.split("\"sha1\"").nth(1)?.split('"').nth(1)?;
    if sha.is_empty() || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let dirty = text
        .split("\"dirty\"")
        .nth(1)
        .is_some_and(|rest| rest.trim_start_matches([':', ' ']).starts_with("true"));
    Some(format!(
        "git:{sha}+packaged{}",
        if dirty { "+dirty" } else { "" }
    ))
}

/// 64-bit FNV-1a (a stable hash without dependencies: it tells builds apart, it is no
/// integrity check).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // Separate consecutive pieces.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }
}
