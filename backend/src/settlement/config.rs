//! How payments settle, as given by flags and the environment: `--settlement simulated|chain`, the
//! chain (`base`, `base-sepolia` or `local`), its RPC URL and USDC address (defaults per network),
//! the scheme (`transfer` or `eip3009`), the receipt timeout, and where the keys come from. Keys
//! are never read from the config file: the environment, or an encrypted keystore whose password
//! is in the environment (see `keystore.rs`).

use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use alloy::primitives::{Address, address};

/// Base mainnet's USDC (Circle's FiatTokenV2_2 behind a proxy), 6 decimals.
pub const BASE_USDC: Address = address!("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
/// Base Sepolia's USDC.
pub const BASE_SEPOLIA_USDC: Address = address!("0x036CbD53842c5426634e7929541eC2318f3dCF7e");

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum SettlementMode {
    /// The ledger alone (it really debits budgets; no money moves anywhere else).
    #[default]
    Simulated,
    /// Each payment is a USDC transfer on chain, captured in the ledger with its hash.
    Chain,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Network {
    /// Base mainnet, chain id 8453.
    Base,
    /// Base Sepolia, chain id 84532.
    BaseSepolia,
    /// A local development chain (anvil), chain id 31337 unless `--chain-id` says otherwise.
    #[default]
    Local,
}

impl Network {
    pub fn default_chain_id(self) -> u64 {
        match self {
            Network::Base => 8453,
            Network::BaseSepolia => 84532,
            Network::Local => 31337,
        }
    }

    /// Public endpoints, rate limited: fine for trying things, not for production traffic.
    pub fn default_rpc_url(self) -> &'static str {
        match self {
            Network::Base => "https://mainnet.base.org",
            Network::BaseSepolia => "https://sepolia.base.org",
            Network::Local => "http://127.0.0.1:8545",
        }
    }

    /// The dev chain (`devchain.rs`) places its USDC at Base's address, so `local` shares it.
    pub fn default_usdc(self) -> Address {
        match self {
            Network::Base | Network::Local => BASE_USDC,
            Network::BaseSepolia => BASE_SEPOLIA_USDC,
        }
    }

    /// The transaction's page on the chain's explorer; a local chain has none.
    pub fn explorer_tx_url(self, tx_hash: &str) -> Option<String> {
        match self {
            Network::Base => Some(format!("https://basescan.org/tx/{tx_hash}")),
            Network::BaseSepolia => Some(format!("https://sepolia.basescan.org/tx/{tx_hash}")),
            Network::Local => None,
        }
    }
}

/// How a payment is carried on chain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Scheme {
    /// An ERC-20 `transfer` sent (and paid for in gas) by the payer's wallet.
    Transfer,
    /// An EIP-3009 `transferWithAuthorization` signed by the payer and submitted by the platform,
    /// as x402's "exact" scheme does.
    #[default]
    Eip3009,
}

/// Settlement flags (flattened into `lachesis serve`). Its `Debug` never shows a key.
#[derive(Clone, Default, clap::Args)]
pub struct SettlementArgs {
    /// How payments settle.
    #[arg(long, env = "LACHESIS_SETTLEMENT", value_enum, default_value_t)]
    pub settlement: SettlementMode,
    /// The chain, for `--settlement chain`.
    #[arg(long = "chain", env = "LACHESIS_CHAIN", value_enum, default_value_t)]
    pub network: Network,
    /// Overrides the network's chain id (checked against the RPC endpoint's).
    #[arg(long, env = "LACHESIS_CHAIN_ID")]
    pub chain_id: Option<u64>,
    /// JSON-RPC endpoint (defaults to the network's public one).
    #[arg(long, env = "LACHESIS_CHAIN_RPC_URL")]
    pub rpc_url: Option<String>,
    /// The USDC contract (defaults to Circle's on the network).
    #[arg(long, env = "LACHESIS_CHAIN_USDC")]
    pub usdc: Option<String>,
    #[arg(
        long = "chain-scheme",
        env = "LACHESIS_CHAIN_SCHEME",
        value_enum,
        default_value_t
    )]
    pub scheme: Scheme,
    /// How long a payment waits for its receipt before leaving the hold to recovery.
    #[arg(long, env = "LACHESIS_CHAIN_RECEIPT_TIMEOUT_SECS")]
    pub receipt_timeout_secs: Option<u64>,
    /// Payer keys, hex, comma-separated (the agents' wallets).
    #[arg(
        long,
        env = "LACHESIS_CHAIN_AGENT_KEYS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub agent_keys: Vec<String>,
    /// Payer keys in encrypted keystores (Web3 secret storage, as `cast wallet new` writes);
    /// the password comes from LACHESIS_CHAIN_KEYSTORE_PASSWORD.
    #[arg(
        long = "agent-keystore",
        env = "LACHESIS_CHAIN_AGENT_KEYSTORES",
        value_delimiter = ','
    )]
    pub agent_keystores: Vec<PathBuf>,
    /// The platform's key, which submits EIP-3009 authorizations and pays their gas.
    #[arg(long, env = "LACHESIS_CHAIN_PLATFORM_KEY", hide_env_values = true)]
    pub platform_key: Option<String>,
    /// The platform's key in an encrypted keystore (password: LACHESIS_CHAIN_KEYSTORE_PASSWORD).
    #[arg(long, env = "LACHESIS_CHAIN_PLATFORM_KEYSTORE")]
    pub platform_keystore: Option<PathBuf>,
}

impl std::fmt::Debug for SettlementArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SettlementArgs")
            .field("settlement", &self.settlement)
            .field("network", &self.network)
            .field("chain_id", &self.chain_id)
            .field("rpc_url", &self.rpc_url)
            .field("usdc", &self.usdc)
            .field("scheme", &self.scheme)
            .field("receipt_timeout_secs", &self.receipt_timeout_secs)
            .field(
                "agent_keys",
                &format_args!("[{} hidden]", self.agent_keys.len()),
            )
            .field("agent_keystores", &self.agent_keystores)
            .field(
                "platform_key",
                &self.platform_key.as_ref().map(|_| "hidden"),
            )
            .field("platform_keystore", &self.platform_keystore)
            .finish()
    }
}

/// The chain a [`super::chain::ChainSettler`] talks to.
#[derive(Debug, Clone)]
pub struct ChainConfig {
    pub network: Network,
    pub chain_id: u64,
    pub rpc_url: String,
    pub usdc: Address,
    pub scheme: Scheme,
    pub receipt_timeout: Duration,
    /// How long an EIP-3009 authorization stays valid (its `validBefore`, from signing).
    pub authorization_validity: Duration,
    /// Each JSON-RPC request gives up after this long.
    pub request_timeout: Duration,
}

impl ChainConfig {
    pub fn for_network(network: Network) -> Self {
        Self {
            network,
            chain_id: network.default_chain_id(),
            rpc_url: network.default_rpc_url().to_string(),
            usdc: network.default_usdc(),
            scheme: Scheme::default(),
            receipt_timeout: Duration::from_secs(60),
            authorization_validity: Duration::from_secs(600),
            request_timeout: Duration::from_secs(10),
        }
    }

    pub fn from_args(args: &SettlementArgs) -> anyhow::Result<Self> {
        let mut config = Self::for_network(args.network);
        if let Some(id) = args.chain_id {
            config.chain_id = id;
        }
        if let Some(url) = &args.rpc_url {
            config.rpc_url = url.clone();
        }
        if let Some(usdc) = &args.usdc {
            config.usdc = parse_address(usdc)?;
        }
        if let Some(secs) = args.receipt_timeout_secs {
            anyhow::ensure!(secs > 0, "the receipt timeout must be at least a second");
            config.receipt_timeout = Duration::from_secs(secs);
        }
        config.scheme = args.scheme;
        Ok(config)
    }
}

/// A 0x-prefixed 20-byte hex address (any case; a mixed-case one must carry a valid checksum).
pub fn parse_address(text: &str) -> anyhow::Result<Address> {
    anyhow::ensure!(
        text.len() == 42 && text.starts_with("0x"),
        "{text:?} is not a 0x-prefixed 20-byte address"
    );
    let hex = &text[2..];
    let mixed =
        hex.chars().any(|c| c.is_ascii_lowercase()) && hex.chars().any(|c| c.is_ascii_uppercase());
    if mixed {
        Address::parse_checksummed(text, None)
            .map_err(|e| anyhow::anyhow!("{text:?} has a bad checksum: {e}"))
    } else {
        Address::from_str(text).map_err(|e| anyhow::anyhow!("{text:?} is not an address: {e}"))
    }
}

/// The ledger's spelling of a wallet: 0x and 40 lowercase hex digits.
pub fn wallet_text(address: Address) -> String {
    format!("{address:#x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn networks_have_their_chain_ids_usdc_and_explorers() {
        assert_eq!(Network::Base.default_chain_id(), 8453);
        assert_eq!(Network::BaseSepolia.default_chain_id(), 84532);
        assert_eq!(Network::Base.default_usdc(), BASE_USDC);
        assert_eq!(
            Network::BaseSepolia.explorer_tx_url("0xab").as_deref(),
            Some("https://sepolia.basescan.org/tx/0xab")
        );
        assert_eq!(
            Network::Base.explorer_tx_url("0xab").as_deref(),
            Some("https://basescan.org/tx/0xab")
        );
        assert_eq!(Network::Local.explorer_tx_url("0xab"), None);
    }

    #[test]
    fn addresses_parse_in_either_case_and_checksums_are_checked() {
        let checksummed = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";
        assert_eq!(parse_address(checksummed).unwrap(), BASE_USDC);
        assert_eq!(
            parse_address(&checksummed.to_lowercase()).unwrap(),
            BASE_USDC
        );
        // One letter's case flipped breaks the checksum.
        assert!(parse_address("0x833589FCD6eDb6E08f4c7C32D4f71b54bdA02913").is_err());
        assert!(parse_address("833589fcd6edb6e08f4c7c32d4f71b54bda02913").is_err());
        assert!(parse_address("0x833589fcd6edb6e08f4c7c32d4f71b54bda0291").is_err());
        assert!(parse_address("0x833589fcd6edb6e08f4c7c32d4f71b54bda0291g").is_err());
    }

    proptest! {
        #[test]
        fn any_address_round_trips_through_both_spellings(bytes in any::<[u8; 20]>()) {
            let address = Address::from(bytes);
            let lower = wallet_text(address);
            prop_assert!(lower.len() == 42 && lower[2..].chars().all(|c| matches!(c, '0'..='9' | 'a'..='f')));
            prop_assert_eq!(parse_address(&lower).unwrap(), address);
            prop_assert_eq!(parse_address(&address.to_checksum(None)).unwrap(), address);
        }

        #[test]
        fn junk_never_parses_as_an_address(text in "\\PC{0,60}") {
            let valid = text.len() == 42 && text.starts_with("0x")
                && text[2..].chars().all(|c| c.is_ascii_hexdigit());
            if !valid {
                prop_assert!(parse_address(&text).is_err());
            }
        }
    }
}
