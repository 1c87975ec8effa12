//! Atomic report directories: everything is written to a temporary sibling directory and
//! renamed into place at the end, so an interrupted or failed run never leaves a
//! half-written report that looks like a real one.

use std::path::{Path, PathBuf};

use crate::error::{AuditError, Result};

/// A report directory being prepared. Created before the (long) run so that an unwritable
/// destination is reported at once; removed on drop unless committed.
#[derive(Debug)]
pub struct OutputDir {
    target: PathBuf,
    tmp: PathBuf,
    committed: bool,
}

fn sibling(target: &Path, tag: &str) -> PathBuf {
    let name = target
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy().into_owned());
    let parent = target.parent().unwrap_or_else(|| Path::new("."));
    parent.join(format!(".{name}.{tag}-{}", std::process::id()))
}

impl OutputDir {
    /// Checks that `target` can become a report directory and creates the temporary
    /// directory next to it.
    ///
    /// # Errors
    /// [`AuditError::Io`] when the parent cannot be created or written, when `target` is a
    /// file, or when it is a non-empty directory that does not hold a previous report
    /// (fl-audit replaces only its own reports).
    pub fn prepare(target: &Path) -> Result<Self> {
        if target.as_os_str().is_empty() {
            return Err(AuditError::usage("--out must not be empty"));
        }
        if target.exists() {
            if !target.is_dir() {
                return Err(AuditError::Io {
                    path: target.display().to_string(),
                    message: "exists and is not a directory".into(),
                });
            }
            let empty = std::fs::read_dir(target)
                .map_err(|e| AuditError::io(target, &e))?
                .next()
                .is_none();
            if !empty && !target.join("report.json").is_file() {
                return Err(AuditError::Io {
                    path: target.display().to_string(),
                    message: "is a non-empty directory without a previous report.json; \
                              refusing to replace it (choose another --out)"
                        .into(),
                });
            }
        }
        if let Some(parent) = target.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent).map_err(|e| AuditError::io(parent, &e))?;
        }
        let tmp = sibling(target, "tmp");
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| AuditError::io(&tmp, &e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| AuditError::io(&tmp, &e))?;
        Ok(Self {
            target: target.to_path_buf(),
            tmp,
            committed: false,
        })
    }

    /// The final directory.
    #[must_use]
    pub fn target(&self) -> &Path {
        &self.target
    }

    /// Writes `files` (name, contents) and moves the directory into place, replacing a
    /// previous report.
    ///
    /// # Errors
    /// [`AuditError::Io`] on any write or rename failure (the temporary directory is then
    /// removed and `target` is left as it was, or absent).
    pub fn commit(mut self, files: &[(String, Vec<u8>)]) -> Result<()> {
        for (name, bytes) in files {
            let path = self.tmp.join(name);
            std::fs::write(&path, bytes).map_err(|e| AuditError::io(&path, &e))?;
        }
        let old = sibling(&self.target, "old");
        let had_old = self.target.exists();
        if had_old {
            if old.exists() {
                std::fs::remove_dir_all(&old).map_err(|e| AuditError::io(&old, &e))?;
            }
            std::fs::rename(&self.target, &old).map_err(|e| AuditError::io(&self.target, &e))?;
        }
        if let Err(e) = std::fs::rename(&self.tmp, &self.target) {
            if had_old {
                let _ = std::fs::rename(&old, &self.target);
            }
            return Err(AuditError::io(&self.target, &e));
        }
        self.committed = true;
        if had_old {
            let _ = std::fs::remove_dir_all(&old);
        }
        Ok(())
    }
}

impl Drop for OutputDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// Writes `files` into `target` atomically (see [`OutputDir`]).
///
/// # Errors
/// As [`OutputDir::prepare`] and [`OutputDir::commit`].
pub fn write_atomically(target: &Path, files: &[(String, Vec<u8>)]) -> Result<()> {
    OutputDir::prepare(target)?.commit(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fl-audit-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn replaces_a_previous_report_and_leaves_no_temporaries() {
        let d = scratch("replace");
        let out = d.join("r");
        write_atomically(&out, &[("report.json".into(), b"1".to_vec())]).unwrap();
        write_atomically(&out, &[("report.json".into(), b"2".to_vec())]).unwrap();
        assert_eq!(std::fs::read(out.join("report.json")).unwrap(), b"2");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn uncommitted_output_leaves_nothing() {
        let d = scratch("drop");
        let out = d.join("r");
        {
            let _prepared = OutputDir::prepare(&out).unwrap();
        }
        assert!(!out.exists());
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 0);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn refuses_foreign_directories_and_files() {
        let d = scratch("foreign");
        std::fs::write(d.join("precious.txt"), b"x").unwrap();
        assert!(
            OutputDir::prepare(&d)
                .unwrap_err()
                .to_string()
                .contains("refusing")
        );
        assert!(OutputDir::prepare(&d.join("precious.txt")).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
