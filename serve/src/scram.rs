//! SCRAM-SHA-256 (RFC 5802, RFC 7677), the server's side, as PostgreSQL runs it: the
//! client proves it knows the password without sending it, and the server proves it
//! knows it too. No channel binding (the client's `n` or `y` flag is accepted).

use base64::Engine as _;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// PBKDF2 iterations, PostgreSQL's default.
pub(crate) const ITERATIONS: u32 = 4096;
pub(crate) const MECHANISM: &str = "SCRAM-SHA-256";

/// The host's password as SCRAM keeps it: salted, never in the clear after start.
#[derive(Clone)]
pub(crate) struct Verifier {
    salt: Vec<u8>,
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(..)")
    }
}

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    for p in parts {
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

/// PBKDF2-HMAC-SHA-256 with one output block (the key is as long as the hash).
fn salted_password(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut u = hmac(password, &[salt, &1u32.to_be_bytes()]);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &[&u]);
        for (o, x) in out.iter_mut().zip(u) {
            *o ^= x;
        }
    }
    out
}

impl Verifier {
    /// The verifier of `password` as SCRAM clients hash it: prepared with SASLprep
    /// (RFC 4013: NFKC, non-ASCII spaces to spaces, soft hyphens and the like gone),
    /// or as it is where SASLprep refuses it (libpq and PostgreSQL do the same), so
    /// that `Ⅸ` and `IX` are one password as they are to PostgreSQL.
    pub(crate) fn new(password: &str, salt: Vec<u8>) -> Self {
        let prepared =
            stringprep::saslprep(password).unwrap_or(std::borrow::Cow::Borrowed(password));
        let salted = salted_password(prepared.as_bytes(), &salt, ITERATIONS);
        let client_key = hmac(&salted, &[b"Client Key"]);
        Self {
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac(&salted, &[b"Server Key"]),
            salt,
        }
    }
}

/// One client's exchange, between the server's first message and its last.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// `n=user,r=client-nonce`
    client_first_bare: String,
    server_first: String,
    nonce: String,
    /// The GS2 header the client sent (`n,,`), which `c=` must repeat.
    gs2_header: String,
}

/// Why an exchange failed: a malformed message (a protocol violation, 08P01) or a
/// wrong password (28P01).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    Malformed(String),
    WrongPassword,
}

fn malformed(why: &str) -> Failure {
    Failure::Malformed(format!("malformed SCRAM message: {why}"))
}

/// The server's first message for the client's first, with `server_nonce` appended
/// to the client's.
pub(crate) fn first(
    verifier: &Verifier,
    client_first: &[u8],
    server_nonce: &[u8],
) -> Result<(Exchange, String), Failure> {
    let text = std::str::from_utf8(client_first).map_err(|_| malformed("not UTF-8"))?;
    // gs2-header: a channel-binding flag, an optional authzid, then the bare message.
    let mut parts = text.splitn(3, ',');
    let flag = parts.next().unwrap_or("");
    let authzid = parts.next().ok_or_else(|| malformed("no GS2 header"))?;
    let bare = parts
        .next()
        .ok_or_else(|| malformed("no client-first-message"))?;
    match flag {
        "n" | "y" => {}
        f if f.starts_with("p=") => {
            return Err(Failure::Malformed(
                "SCRAM channel binding is not supported: connect with channel_binding=disable \
                 or prefer"
                    .into(),
            ))
        }
        _ => return Err(malformed("unknown channel-binding flag")),
    }
    let client_nonce = bare
        .split(',')
        .find_map(|a| a.strip_prefix("r="))
        .filter(|n| !n.is_empty())
        .ok_or_else(|| malformed("no nonce"))?;
    let nonce = format!(
        "{client_nonce}{}",
        base64::engine::general_purpose::STANDARD.encode(server_nonce)
    );
    let server_first = format!(
        "r={nonce},s={},i={ITERATIONS}",
        base64::engine::general_purpose::STANDARD.encode(&verifier.salt)
    );
    Ok((
        Exchange {
            client_first_bare: bare.to_owned(),
            server_first: server_first.clone(),
            nonce,
            gs2_header: format!("{flag},{authzid},"),
        },
        server_first,
    ))
}

/// Checks the client's final message (its proof); the server's final message
/// (`v=` its signature) when the password was right.
pub(crate) fn last(
    verifier: &Verifier,
    exchange: &Exchange,
    client_final: &[u8],
) -> Result<String, Failure> {
    let text = std::str::from_utf8(client_final).map_err(|_| malformed("not UTF-8"))?;
    let (without_proof, proof) = text
        .rsplit_once(",p=")
        .ok_or_else(|| malformed("no proof"))?;
    let mut binding = None;
    let mut nonce = None;
    for attr in without_proof.split(',') {
        if let Some(c) = attr.strip_prefix("c=") {
            binding = Some(c);
        } else if let Some(r) = attr.strip_prefix("r=") {
            nonce = Some(r);
        }
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let binding = b64
        .decode(binding.ok_or_else(|| malformed("no channel binding"))?)
        .map_err(|_| malformed("channel binding is not base64"))?;
    if binding != exchange.gs2_header.as_bytes() {
        return Err(malformed("channel binding differs from the first message"));
    }
    if nonce != Some(exchange.nonce.as_str()) {
        return Err(malformed("nonce differs from the server's"));
    }
    let proof = b64
        .decode(proof)
        .map_err(|_| malformed("proof is not base64"))?;
    if proof.len() != 32 {
        return Err(malformed("proof is not 32 bytes"));
    }
    let auth_message = format!(
        "{},{},{without_proof}",
        exchange.client_first_bare, exchange.server_first
    );
    let signature = hmac(&verifier.stored_key, &[auth_message.as_bytes()]);
    let client_key: Vec<u8> = proof.iter().zip(signature).map(|(p, s)| p ^ s).collect();
    let stored: [u8; 32] = Sha256::digest(&client_key).into();
    // Constant time: a mismatch anywhere takes as long as one at the end.
    let differ = stored
        .iter()
        .zip(verifier.stored_key)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if differ != 0 {
        return Err(Failure::WrongPassword);
    }
    let server_signature = hmac(&verifier.server_key, &[auth_message.as_bytes()]);
    Ok(format!("v={}", b64.encode(server_signature)))
}

/// `n` random bytes from the system.
pub(crate) fn random(n: usize) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's example exchange (user "user", password "pencil").
    #[test]
    fn the_rfc_7677_exchange_verifies() {
        let salt = base64::engine::general_purpose::STANDARD
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .expect("salt");
        let verifier = Verifier::new("pencil", salt);
        let client_first = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
        // The RFC's server nonce is this text, base64 of these bytes.
        let server_nonce = base64::engine::general_purpose::STANDARD
            .decode("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
            .unwrap_or_default();
        // The RFC's nonce suffix is not base64 of anything; build the exchange by hand.
        let (mut exchange, _) = first(&verifier, client_first, &server_nonce).expect("first");
        exchange.nonce = "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into();
        exchange.server_first =
            "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                .into();
        let client_final = b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
        assert_eq!(
            last(&verifier, &exchange, client_final).as_deref(),
            Ok("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
        );
        let wrong = Verifier::new("pencil2", verifier.salt.clone());
        assert_eq!(
            last(&wrong, &exchange, client_final),
            Err(Failure::WrongPassword)
        );
        assert!(matches!(
            last(
                &verifier,
                &exchange,
                b"c=biws,r=other,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
            ),
            Err(Failure::Malformed(_))
        ));
    }
}
