//! Where signing keys come from: a hex key in an environment variable, or an encrypted keystore
//! (Web3 secret storage v3: scrypt + AES-128-CTR, the format of `cast wallet`, geth and MetaMask
//! exports) whose password is in the environment. A file holding a key in plain text is refused:
//! a key at rest is always encrypted.

use std::path::{Path, PathBuf};

use alloy::primitives::B256;
use alloy::signers::local::{LocalSignerError, PrivateKeySigner};

/// The environment variable holding the password of every keystore given.
pub const PASSWORD_ENV: &str = "LACHESIS_CHAIN_KEYSTORE_PASSWORD";

#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("{0}: not a private key (want 32 bytes as 64 hex digits, 0x optional)")]
    BadKey(String),
    #[error("{path}: wrong keystore password")]
    WrongPassword { path: PathBuf },
    #[error(
        "{path}: holds a private key in plain text; keys at rest must be encrypted \
         (`lachesis ledger keystore` or `cast wallet import` writes a keystore)"
    )]
    PlaintextKey { path: PathBuf },
    #[error("{path}: not an encrypted keystore: {reason}")]
    NotAKeystore { path: PathBuf, reason: String },
    #[error("{0} is not set (the keystore password)")]
    NoPassword(&'static str),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// A hex private key (64 digits, `0x` optional, surrounding whitespace ignored). `what` names
/// where it came from, for the error (the key itself is never shown).
pub fn parse_hex_key(text: &str, what: &str) -> Result<PrivateKeySigner, KeyError> {
    let digits = text.trim();
    let digits = digits.strip_prefix("0x").unwrap_or(digits);
    if digits.len() != 64 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(KeyError::BadKey(what.to_string()));
    }
    let bytes: B256 = digits
        .parse()
        .map_err(|_| KeyError::BadKey(what.to_string()))?;
    PrivateKeySigner::from_bytes(&bytes).map_err(|_| KeyError::BadKey(what.to_string()))
}

/// Decrypts a keystore file.
pub fn load_keystore(path: &Path, password: &str) -> Result<PrivateKeySigner, KeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if parse_hex_key(&text, "").is_ok() {
        return Err(KeyError::PlaintextKey {
            path: path.to_path_buf(),
        });
    }
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| KeyError::NotAKeystore {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if json.get("crypto").or_else(|| json.get("Crypto")).is_none() {
        return Err(KeyError::NotAKeystore {
            path: path.to_path_buf(),
            reason: "no `crypto` section".into(),
        });
    }
    PrivateKeySigner::decrypt_keystore(path, password).map_err(|e| match e {
        LocalSignerError::EthKeystoreError(eth_keystore::KeystoreError::MacMismatch) => {
            KeyError::WrongPassword {
                path: path.to_path_buf(),
            }
        }
        other => KeyError::NotAKeystore {
            path: path.to_path_buf(),
            reason: other.to_string(),
        },
    })
}

/// Decrypts a keystore with the password from [`PASSWORD_ENV`].
pub fn load_keystore_from_env(path: &Path) -> Result<PrivateKeySigner, KeyError> {
    let password = std::env::var(PASSWORD_ENV).map_err(|_| KeyError::NoPassword(PASSWORD_ENV))?;
    load_keystore(path, &password)
}

/// Encrypts `signer`'s key into `dir/name` (readable by its owner only) and returns the path.
pub fn write_keystore(
    dir: &Path,
    name: &str,
    signer: &PrivateKeySigner,
    password: &str,
) -> Result<PathBuf, KeyError> {
    let path = dir.join(name);
    let io = |source| KeyError::Io {
        path: path.clone(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut rng = rand08::thread_rng();
    eth_keystore::encrypt_key(dir, &mut rng, signer.to_bytes(), password, Some(name)).map_err(
        |e| KeyError::NotAKeystore {
            path: path.clone(),
            reason: e.to_string(),
        },
    )?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn temp_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "lachesis-keystore-{tag}-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_keystore_round_trips_and_a_wrong_password_is_a_typed_error() {
        let dir = temp_dir("roundtrip");
        let signer = PrivateKeySigner::random();
        let path = write_keystore(&dir, "agent.json", &signer, "correct horse").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let key_hex = format!("{:x}", signer.to_bytes());
        assert!(!text.contains(&key_hex[2..]), "the key is stored encrypted");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let back = load_keystore(&path, "correct horse").unwrap();
        assert_eq!(back.address(), signer.address());
        assert!(matches!(
            load_keystore(&path, "battery staple"),
            Err(KeyError::WrongPassword { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_plaintext_key_file_is_refused() {
        let dir = temp_dir("plain");
        let path = dir.join("key.txt");
        let signer = PrivateKeySigner::random();
        std::fs::write(&path, format!("{}\n", signer.to_bytes())).unwrap();
        assert!(matches!(
            load_keystore(&path, "anything"),
            Err(KeyError::PlaintextKey { .. })
        ));
        std::fs::write(&path, "{\"address\": \"00\"}").unwrap();
        assert!(matches!(
            load_keystore(&path, "anything"),
            Err(KeyError::NotAKeystore { .. })
        ));
        assert!(matches!(
            load_keystore(&dir.join("missing.json"), "anything"),
            Err(KeyError::Io { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn hex_keys_parse_with_or_without_0x_and_errors_do_not_show_the_key() {
        let key = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
        let signer = parse_hex_key(key, "LACHESIS_CHAIN_PLATFORM_KEY").unwrap();
        assert_eq!(
            format!("{:#x}", signer.address()),
            "0xf39fd6e51aad88f6f4ce6ab8827279cfffb92266"
        );
        assert_eq!(
            parse_hex_key(&key[2..], "x").unwrap().address(),
            signer.address()
        );
        let error = parse_hex_key(&key[..60], "LACHESIS_CHAIN_AGENT_KEYS").unwrap_err();
        assert!(!error.to_string().contains(&key[2..20]));
        // Zero is not a valid secp256k1 key.
        assert!(parse_hex_key(&"0".repeat(64), "x").is_err());
    }

    proptest! {
        #[test]
        fn any_valid_key_round_trips_through_hex(bytes in any::<[u8; 32]>()) {
            let Ok(signer) = PrivateKeySigner::from_slice(&bytes) else { return Ok(()) };
            let text = format!("  {}\n", signer.to_bytes());
            prop_assert_eq!(parse_hex_key(&text, "x").unwrap().address(), signer.address());
        }

        #[test]
        fn short_long_or_non_hex_text_is_never_a_key(text in "\\PC{0,80}") {
            let digits = text.trim();
            let digits = digits.strip_prefix("0x").unwrap_or(digits);
            if digits.len() != 64 || !digits.chars().all(|c| c.is_ascii_hexdigit()) {
                prop_assert!(parse_hex_key(&text, "x").is_err());
            }
        }
    }
}
