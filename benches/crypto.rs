//! Benchmark (not a test): signing and verifying a Release with the crypto
//! backend this build was compiled with. `benches/crypto.sh` runs it for the
//! pure-Rust backend and for OpenSSL and prints the ratios.
//!   cargo bench --bench crypto [--no-default-features --features crypto-openssl]

use std::time::{Duration, Instant, SystemTime};

use debforge::openpgp::PinnedKeyring;
use debforge::openpgp::sign::{KeyAlgo, SigningKey, generate, sign_cleartext, sign_detached};

/// Runs `f` until `budget` has passed (at least 5 times); operations a second.
fn rate(budget: Duration, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    let mut n = 0u32;
    while n < 5 || start.elapsed() < budget {
        f();
        n += 1;
    }
    f64::from(n) / start.elapsed().as_secs_f64()
}

fn main() {
    // A Release the size of a 5,000-package repository's (three digests of
    // twelve indexes is far less; this errs on the large side).
    let mut release = String::from("Origin: bench\nLabel: bench\nSuite: bionic\n");
    for i in 0..2000 {
        release.push_str(&format!(
            " {:064x} {:>8} main/binary-amd64/Packages{i}\n",
            i * 7919,
            i * 31
        ));
    }
    let data = release.as_bytes();
    let now = SystemTime::now();
    for (name, algo) in [("ed25519", KeyAlgo::Ed25519), ("rsa4096", KeyAlgo::Rsa4096)] {
        let t = Instant::now();
        let secret = generate("bench <bench@example.org>", algo, None, None).expect("generate");
        let keygen = t.elapsed().as_secs_f64();
        let key = SigningKey::from_bytes(&secret, None).expect("key");
        let keyring = PinnedKeyring::all(&key.public_binary()).expect("keyring");
        let budget = Duration::from_secs(2);
        let sign = rate(budget, || {
            sign_cleartext(std::slice::from_ref(&key), data, now).expect("sign");
        });
        let signed = sign_cleartext(std::slice::from_ref(&key), data, now).expect("sign");
        let detached = sign_detached(std::slice::from_ref(&key), data, now).expect("sign");
        let verify = rate(budget, || {
            keyring.verify_cleartext(&signed).expect("verify");
        });
        let verify_detached = rate(budget, || {
            keyring.verify_detached(data, &detached).expect("verify");
        });
        println!(
            "{name} keygen_s {keygen:.3} sign_per_s {sign:.1} verify_per_s {verify:.1} verify_detached_per_s {verify_detached:.1}"
        );
    }
}
