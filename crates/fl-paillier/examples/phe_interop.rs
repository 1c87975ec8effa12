//! Reads and writes exactly the files python-paillier's `pheutil` reads and writes, so a
//! number encrypted by either side decrypts on the other.
//!
//! ```sh
//! pheutil genpkey --keysize 2048 private.json
//! pheutil extract private.json public.json
//! echo 3.14 > x.txt
//! cargo run -p fl-paillier --example phe_interop -- encrypt --key public.json --in x.txt --out x.enc.json
//! pheutil decrypt private.json x.enc.json                 # prints 3.14
//! pheutil encrypt public.json -- -2.5 --output y.enc.json
//! cargo run -p fl-paillier --example phe_interop -- decrypt --key private.json --in y.enc.json   # -2.5
//! ```
//!
//! * `encrypt --key PUBLIC_JWK`: reads a plaintext number (a JSON number, e.g. `3.14`,
//!   `-2`, `1e-5`) and writes `{"v": "<ciphertext>", "e": -32}` like `pheutil encrypt`
//!   (phe's float encoding, exponent lowered to −32).
//! * `decrypt --key PRIVATE_JWK`: reads `{"v", "e"}` and writes the number as
//!   `pheutil decrypt` prints it (Python's float `repr`).
//!
//! `--in` and `--out` default to standard input and output. Errors go to standard error
//! with a non-zero exit code.

use fl_paillier::PheEncryptedNumber;
use fl_paillier::phe::{
    decrypt_to_pheutil_output, encrypted_number_from_json, encrypted_number_to_json,
    private_key_from_jwk, public_key_from_jwk,
};
use std::io::{Read, Write};
use std::process::ExitCode;

const USAGE: &str = "usage: phe_interop {encrypt|decrypt} --key KEY.json [--in FILE] [--out FILE]";

struct Args {
    command: String,
    key: String,
    input: Option<String>,
    output: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let command = it.next().ok_or(USAGE)?;
    if command != "encrypt" && command != "decrypt" {
        return Err(format!("unknown command {command:?}\n{USAGE}"));
    }
    let (mut key, mut input, mut output) = (None, None, None);
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?;
        match flag.as_str() {
            "--key" => key = Some(value),
            "--in" => input = Some(value),
            "--out" => output = Some(value),
            _ => return Err(format!("unknown option {flag:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        command,
        key: key.ok_or_else(|| format!("--key is required\n{USAGE}"))?,
        input,
        output,
    })
}

fn read_input(path: Option<&str>) -> Result<String, String> {
    match path {
        Some(p) => std::fs::read_to_string(p).map_err(|e| format!("cannot read {p}: {e}")),
        None => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .map_err(|e| format!("cannot read standard input: {e}"))?;
            Ok(s)
        }
    }
}

fn write_output(path: Option<&str>, text: &str) -> Result<(), String> {
    match path {
        Some(p) => std::fs::write(p, text).map_err(|e| format!("cannot write {p}: {e}")),
        None => std::io::stdout()
            .write_all(text.as_bytes())
            .map_err(|e| format!("cannot write standard output: {e}")),
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let key_json = read_input(Some(&args.key))?;
    let input = read_input(args.input.as_deref())?;
    let text = if args.command == "encrypt" {
        let ek = public_key_from_jwk(&key_json).map_err(|e| format!("public key: {e}"))?;
        if ek.bits() < 2048 {
            eprintln!(
                "warning: a {}-bit key is not secure (use >= 2048 bits)",
                ek.bits()
            );
        }
        let x: f64 = serde_json::from_str(input.trim())
            .map_err(|_| format!("plaintext must be a JSON number, got {:?}", input.trim()))?;
        let mut rng = rand::make_rng::<rand::rngs::ChaCha20Rng>();
        let enc = PheEncryptedNumber::encrypt_f64(&ek, x, &mut rng).map_err(|e| e.to_string())?;
        encrypted_number_to_json(&ek, &enc).map_err(|e| e.to_string())?
    } else {
        let dk = private_key_from_jwk(&key_json).map_err(|e| format!("private key: {e}"))?;
        let enc = encrypted_number_from_json(dk.encryption_key(), &input)
            .map_err(|e| format!("ciphertext: {e}"))?;
        decrypt_to_pheutil_output(&dk, &enc).map_err(|e| e.to_string())?
    };
    write_output(args.output.as_deref(), &format!("{text}\n"))
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("phe_interop: {e}");
            ExitCode::FAILURE
        }
    }
}
