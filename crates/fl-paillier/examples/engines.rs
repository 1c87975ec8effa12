//! Prints the arithmetic engines this CPU can run, one name per line, the default last
//! (unless `FL_PAILLIER_ENGINE` names another one as the default)
//! (`.ci/run` uses it to say which kernels its `cargo test -p fl-paillier` exercised: every
//! arithmetic test runs on each of them).
//!
//! ```sh
//! cargo run -p fl-paillier --example engines
//! ```

fn main() {
    for engine in fl_paillier::Engine::available() {
        println!("{engine}");
    }
}
