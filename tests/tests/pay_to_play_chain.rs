//! Pay-to-Play settled on chain: against anvil with Circle's USDC, an episode's panel is paid by
//! EIP-3009 authorizations the agent signs and the platform submits, the feed carries each
//! payment's transaction hash, the cards' owners hold the USDC on chain, cards whose owners have no
//! wallet are never chosen, and the ledger reconciles with the chain.

use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use lachesis::envs::pay_to_play::{Marketplace, PayToPlayEnv};
use lachesis::envs::{EnvOptions, Environment};
use lachesis::ledger::Ledger;
use lachesis::marketplace::judges::Judges;
use lachesis::settlement::devchain::{DevChain, DevChainOptions};
use lachesis::settlement::{ChainConfig, ChainSettler, Network, Scheme, Settler};
use lachesis_shared::marketplace::MarketEvent;
use lachesis_tests::fresh_database;
use lachesis_tests::scripted::ScriptedPolicy;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_episode_pays_its_panel_on_chain_and_the_feed_shows_the_transfers() {
    let chain = DevChain::start(DevChainOptions::default())
        .await
        .unwrap_or_else(|e| panic!("{e:#}"));
    let url = fresh_database().await;
    let db = lachesis::db::connect(&url, 8).await.unwrap();
    lachesis::db::migrate(&db).await.unwrap();
    lachesis::marketplace::cards::seed(&db).await.unwrap();

    let agent = PrivateKeySigner::random();
    let platform = PrivateKeySigner::random();
    chain.fund_eth(platform.address(), 10).await.unwrap();
    chain
        .mint(agent.address(), U256::from(1_000_000u64))
        .await
        .unwrap();
    // Two cards' owners have wallets; the others cannot be paid on chain.
    let owners: Vec<(&str, Address)> = ["play-therapist", "safety-inspector"]
        .into_iter()
        .map(|slug| (slug, PrivateKeySigner::random().address()))
        .collect();
    for (slug, wallet) in &owners {
        sqlx::query("UPDATE ledger_accounts SET wallet = $1 WHERE name = $2")
            .bind(format!("{wallet:#x}"))
            .bind(format!("card/{slug}"))
            .execute(&db)
            .await
            .unwrap();
    }

    let mut config = ChainConfig::for_network(Network::Local);
    config.rpc_url = chain.url.clone();
    config.chain_id = chain.chain_id;
    config.usdc = chain.usdc;
    config.scheme = Scheme::Eip3009;
    let settler = ChainSettler::connect(config, vec![agent.clone()], Some(platform.clone()))
        .await
        .expect("connect the settler");
    let ledger = Ledger::new(db.clone());
    let market = Marketplace {
        ledger: ledger.clone(),
        settler: Settler::Chain(std::sync::Arc::new(settler)),
        judges: Judges::default(),
        queue_items: lachesis::feedback::DEFAULT_QUEUE_ITEMS,
    };
    let options: EnvOptions = serde_json::from_value(json!({"seed": 1, "group_size": 2,
        "settings": {"run": "p2p-chain", "budget_usdc": "0.5", "panel": 3}}))
    .unwrap();
    let env = PayToPlayEnv::new(&options, market).unwrap();
    env.setup().await.unwrap();
    let policy = ScriptedPolicy::new(&["Fresh water and a vet visit.", "A song."]);

    for seed in 0..3u64 {
        let group = env
            .collect(json!({ "seed": seed }), &policy)
            .await
            .unwrap()
            .group
            .expect("a judged episode");
        assert_eq!(group.sequences.len(), 2);
    }
    let feed = lachesis::marketplace::feed::recent(&db, Some("p2p-chain"), 10)
        .await
        .unwrap();
    assert_eq!(feed.len(), 3);
    let mut paid_on_chain = 0u64;
    for event in &feed {
        let MarketEvent::Round(round) = event else {
            panic!("{event:?}")
        };
        for card in &round.cards {
            assert!(
                owners.iter().any(|(slug, _)| *slug == card.slug),
                "only cards with a wallet are chosen on chain: {}",
                card.slug
            );
            let hash = card.chain_tx.as_deref().expect("a transaction hash");
            assert!(hash.starts_with("0x") && hash.len() == 66, "{hash}");
            assert_eq!(card.explorer_url, None, "a local chain has no explorer");
            paid_on_chain += card.price.0 as u64;
        }
    }
    // The owners hold on chain exactly what the rounds paid them.
    let mut received = 0u64;
    for (_, wallet) in &owners {
        received += chain.usdc_balance(*wallet).await.unwrap().to::<u64>();
    }
    assert_eq!(received, paid_on_chain);
    let agent_left = chain
        .usdc_balance(agent.address())
        .await
        .unwrap()
        .to::<u64>();
    assert_eq!(agent_left, 1_000_000 - paid_on_chain);
    let report = lachesis::ledger::reconcile::reconcile(&db).await.unwrap();
    assert!(report.is_balanced(), "{report}");
}
