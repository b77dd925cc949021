//! `lachesis devchain`: a local chain for trying chain settlement by hand. It starts anvil (npm),
//! deploys Circle's USDC at Base's address, makes a throwaway agent and platform wallet with gas
//! and USDC, gives the platform's judge cards owner wallets when a database is named, prints how
//! to point `lachesis serve` at it, and runs until interrupted.
//!
//! The keys it prints are fresh random keys for this throwaway chain only.

use alloy::primitives::U256;
use alloy::signers::local::PrivateKeySigner;
use anyhow::Context;

use super::config::wallet_text;
use super::devchain::{DevChain, DevChainOptions};
use crate::ledger::AccountId;
use crate::ledger::queries::{account_wallets, set_wallet};

#[derive(Debug, clap::Args)]
pub struct DevchainArgs {
    /// USDC minted to the agent's wallet.
    #[arg(long, default_value_t = 100)]
    pub usdc: u64,
    /// A database whose platform cards without a wallet get a fresh one on this chain, so the
    /// Pay-to-Play environment can pay them.
    #[arg(long, env = "DATABASE_URL")]
    pub database_url: Option<String>,
}

pub async fn run(args: &DevchainArgs) -> anyhow::Result<()> {
    let chain = DevChain::start(DevChainOptions::default()).await?;
    let agent = PrivateKeySigner::random();
    let platform = PrivateKeySigner::random();
    chain.fund_eth(agent.address(), 10).await?;
    chain.fund_eth(platform.address(), 10).await?;
    chain
        .mint(
            agent.address(),
            U256::from(args.usdc) * U256::from(1_000_000u64),
        )
        .await?;
    if let Some(url) = &args.database_url {
        let db = crate::db::connect(url, 2).await?;
        crate::db::migrate(&db).await?;
        crate::marketplace::cards::seed(&db).await?;
        let platform_cards: Vec<i64> =
            sqlx::query_scalar("SELECT account_id FROM agent_cards WHERE owner_team IS NULL")
                .fetch_all(&db)
                .await
                .context("listing the platform's cards")?;
        let platform_cards: Vec<AccountId> = platform_cards.into_iter().map(AccountId).collect();
        let accounts = account_wallets(&db, &platform_cards)
            .await
            .context("listing the platform's cards")?;
        for account in accounts.iter().filter(|account| account.wallet.is_none()) {
            let wallet = wallet_text(PrivateKeySigner::random().address());
            set_wallet(&db, &account.name, &wallet).await?;
            println!("{} is paid at {wallet}", account.name);
        }
    }
    println!(
        "dev chain: {} (chain id {}), USDC at {:#x}\nagent wallet {:#x} holds {} USDC\n\n\
         export LACHESIS_SETTLEMENT=chain LACHESIS_CHAIN=local LACHESIS_CHAIN_RPC_URL={} \
         LACHESIS_CHAIN_ID={} LACHESIS_CHAIN_AGENT_KEYS=0x{} LACHESIS_CHAIN_PLATFORM_KEY=0x{}\n\n\
         then `make run` (or `lachesis serve`) settles Pay-to-Play payments on this chain. \
         Ctrl-C stops it.",
        chain.url,
        chain.chain_id,
        chain.usdc,
        agent.address(),
        args.usdc,
        chain.url,
        chain.chain_id,
        alloy::hex::encode(agent.to_bytes()),
        alloy::hex::encode(platform.to_bytes()),
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}
