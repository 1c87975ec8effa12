//! fl-audit's counts files (a shard's tables, written by anyone) and their merge: reading,
//! validating and merging a counts file, then analysing the merge, returns a value or a
//! typed one-line error, never panics, never allocates for what the file only claims.
//! The file's build is set to this build's first, so that the fuzzer explores the tables
//! rather than the build check (which the seed corpus could never pass twice).
#![no_main]

use fl_audit::shard::{BUILD_ID, Counts, Merge};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = match serde_json::from_slice::<serde_json::Value>(data) {
        Ok(serde_json::Value::Object(mut o)) => {
            if o.contains_key("fl_audit_build") {
                o.insert("fl_audit_build".into(), BUILD_ID.into());
            }
            serde_json::to_vec(&o).unwrap_or_default()
        }
        _ => data.to_vec(),
    };
    let counts = match Counts::parse("fuzz.json", &text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.to_string().is_empty());
            return;
        }
    };
    let valid = counts.validate("fuzz.json").is_ok();
    match Merge::of(vec![("fuzz.json".into(), counts)]) {
        Ok(merge) => {
            // A merge validates every file: a refused file never merges.
            assert!(valid);
            let _ = merge.report();
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});
