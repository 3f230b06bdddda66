//! Proof that a serve is the one `serve.json` records. `serve` draws a
//! key for each run and writes it beside its URL (0600); the CLI sends a
//! fresh nonce, with no credential, to `POST /api/serve-proof`, and the
//! serve answers HMAC-SHA256 of the nonce under that key. Whoever bound
//! the port of a serve that was killed holds no key: the CLI then sends
//! it no token and no file. A fresh nonce each time makes an answer
//! useless to replay; the key never leaves the state directory.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::api::ApiError;
use crate::{Error, Result};

/// What the proof's MAC covers besides the nonce, so an answer can mean
/// nothing else.
const CONTEXT: &[u8] = b"tmux-engine serve proof v1\0";

/// The shortest and longest nonce (hex digits) the route takes.
const NONCE_HEX: std::ops::RangeInclusive<usize> = 32..=128;

/// A serve's secret proof key (hex), for this run only.
#[derive(Clone, PartialEq, Eq)]
pub struct ProofKey(String);

impl std::fmt::Debug for ProofKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProofKey(..)")
    }
}

impl ProofKey {
    /// A new random key (256 bits).
    ///
    /// # Errors
    /// `IO` without randomness.
    pub fn generate() -> Result<ProofKey> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| Error::io("drawing a proof key", std::io::Error::other(e)))?;
        Ok(ProofKey(hex(&bytes)))
    }

    /// The key as recorded (`serve.json`'s `proof`).
    pub fn from_recorded(text: &str) -> ProofKey {
        ProofKey(text.to_owned())
    }

    /// The key as the file records it.
    pub fn recorded(&self) -> &str {
        &self.0
    }

    /// The proof of `nonce`: hex HMAC-SHA256 under this key.
    pub fn prove(&self, nonce: &str) -> String {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.0.as_bytes());
        let mut context = ring::hmac::Context::with_key(&key);
        context.update(CONTEXT);
        context.update(nonce.as_bytes());
        hex(context.sign().as_ref())
    }

    /// Whether `proof` is this key's proof of `nonce` (constant time).
    pub fn verify(&self, nonce: &str, proof: &str) -> bool {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, self.0.as_bytes());
        let Some(tag) = unhex(proof) else {
            return false;
        };
        let mut message = CONTEXT.to_vec();
        message.extend_from_slice(nonce.as_bytes());
        ring::hmac::verify(&key, &message, &tag).is_ok()
    }
}

/// A fresh nonce for one proof (128 bits, hex).
///
/// # Errors
/// `IO` without randomness.
pub fn nonce() -> Result<String> {
    super::generate_token()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// `POST /api/serve-proof`'s body.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ProofRequest {
    /// A fresh random nonce: 32 to 128 hex digits.
    #[schemars(length(min = 32, max = 128), regex(pattern = r"^[0-9a-fA-F]*$"))]
    pub nonce: String,
}

/// Its answer.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub(super) struct ProofAnswer {
    /// Hex HMAC-SHA256 of the nonce under the key this serve recorded.
    pub proof: String,
}

/// `POST /api/serve-proof {"nonce"}` (no credential: the CLI asks before
/// it sends one): the proof, or 404 for a bridge that recorded no key.
pub(super) async fn serve_proof(
    State(state): State<AppState>,
    body: std::result::Result<Bytes, BytesRejection>,
) -> std::result::Result<Response, ApiError> {
    let ProofRequest { nonce } = super::signin::json_body(body)?;
    if !NONCE_HEX.contains(&nonce.len()) || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(ApiError::from(Error::InvalidInput(format!(
            "a nonce is {} to {} hex digits",
            NONCE_HEX.start(),
            NONCE_HEX.end()
        ))));
    }
    let Some(key) = &state.config.proof_key else {
        return Err(ApiError::from(Error::InvalidInput(
            "this serve records no proof key".to_owned(),
        ))
        .with_status(StatusCode::NOT_FOUND));
    };
    Ok(Json(ProofAnswer {
        proof: key.prove(&nonce),
    })
    .into_response())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_verifies_under_its_key_only() {
        let key = ProofKey::generate().unwrap();
        let once = nonce().unwrap();
        let proof = key.prove(&once);
        assert!(key.verify(&once, &proof));
        assert!(!key.verify(&nonce().unwrap(), &proof), "another nonce");
        let other = ProofKey::generate().unwrap();
        assert!(!other.verify(&once, &proof), "another key");
        assert!(!key.verify(&once, "zz"));
        assert!(!key.verify(&once, ""));
        assert_eq!(ProofKey::from_recorded(key.recorded()), key);
        assert_eq!(format!("{key:?}"), "ProofKey(..)");
    }
}
