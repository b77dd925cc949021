//! The `lachesis` command: serve the platform, run migrations, benchmark.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use lachesis::config::{FileConfig, ServeArgs, ServeConfig};

// Training frees and reallocates hundreds of MB of activations every step; glibc's allocator
// hands such blocks back to the kernel and faults them in again (a fifth of a LoRA step's time),
// mimalloc keeps and reuses them: 1.4x (LoRA) to 1.8x (full) training tokens/s.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "lachesis",
    version,
    about = "Reinforcement-learning environments for language models"
)]
struct Cli {
    /// A TOML config file; flags and LACHESIS_* variables override its keys.
    #[arg(long, global = true, env = "LACHESIS_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the trajectory API and the browser app.
    Serve(Box<ServeArgs>),
    /// Apply database migrations and exit.
    Migrate {
        #[arg(long, env = "DATABASE_URL")]
        database_url: Option<String>,
    },
    /// Environments: serve one to a trajectory API, process groups to a file, evaluate.
    Env {
        #[command(subcommand)]
        command: lachesis::envs::cli::EnvCommand,
    },
    /// DeepSacrifice chess: self-play learning.
    Chess {
        #[command(subcommand)]
        command: lachesis::chess::cli::ChessCommand,
    },
    /// MCP tool calling: `solve` plays generated tasks with their plans on the real servers.
    Mcp {
        #[command(subcommand)]
        command: lachesis::envs::mcp_tools::cli::McpCommand,
    },
    /// Protein binder design: `design` runs the four stages once on a target.
    Protein {
        #[command(subcommand)]
        command: lachesis::envs::protein_binder::cli::ProteinCommand,
    },
    /// NVIDIA NIM's protein tools served locally: ProteinMPNN for real, the GPU-only models as
    /// labelled geometric stand-ins.
    Nim {
        #[command(subcommand)]
        command: NimCommand,
    },
    /// The arena offline: `fit` rates battles given in Chatbot Arena's public format.
    Arena {
        #[command(subcommand)]
        command: lachesis::arena::cli::ArenaCommand,
    },
    /// GRPO training: `demo` (a tiny model learns a toy task end to end) and `run`.
    Train {
        #[command(subcommand)]
        command: lachesis::trainer::cli::TrainCommand,
    },
    /// Spatial reasoning: solve generated tasks, show one, benchmark the physics.
    Spatial {
        #[command(subcommand)]
        command: lachesis::spatial::cli::SpatialCommand,
    },
    /// A local chain with USDC and funded throwaway wallets, for trying chain settlement.
    Devchain(lachesis::settlement::devchain_cli::DevchainArgs),
    /// The USDC ledger: reconcile, balances, deposits.
    Ledger {
        #[command(subcommand)]
        command: lachesis::ledger::cli::LedgerCommand,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        which: BenchCommand,
    },
}

#[derive(Subcommand)]
enum NimCommand {
    /// Serve AlphaFold2, RFdiffusion, ProteinMPNN and AlphaFold2-Multimer in NIM's protocol.
    Serve(lachesis::nim_serve::NimServeArgs),
}

#[derive(Subcommand)]
enum BenchCommand {
    /// Ingest throughput and `/batch` latency of one or more trajectory APIs, side by side.
    Api(lachesis::bench::ApiBenchArgs),
    /// Generation tokens/s of OpenAI-compatible servers (the embedded model, llama.cpp), side by side.
    Generate(lachesis::bench::generate::GenerateBenchArgs),
    /// Live hub fan-out: delivery latency and server memory with N WebSocket watchers.
    Fanout(lachesis::bench::fanout::FanoutBenchArgs),
    /// MCP tool-call round trips of our client (rmcp) against the Python SDK's, on one server.
    Mcp(lachesis::bench::mcp::McpBenchArgs),
    /// Protein binder design episodes/hour through the NIM services, and ProteinMPNN's designs/s
    /// against the Python package's program on the same backbone.
    Protein(lachesis::bench::protein::ProteinBenchArgs),
    /// Arena leaderboard (fit + bootstrap) against a FastChat-style scikit-learn reference.
    Arena(lachesis::arena::bench::ArenaBenchArgs),
    /// Arena votes/s through the HTTP route with every integrity check on.
    ArenaVotes(lachesis::arena::ingest_bench::ArenaVotesBenchArgs),
    /// The chess agent's time to answer a move at its default depth.
    Chess(lachesis::chess::cli::MoveLatencyArgs),
    /// Ledger payments/s with many concurrent payers, then a reconcile.
    Ledger(lachesis::ledger::bench::LedgerBenchArgs),
    /// The card bandit's value per dollar on real judged episodes, against an oracle.
    PayToPlay(lachesis::envs::pay_to_play::bench::PayToPlayBenchArgs),
    /// Training tokens/s of GRPO steps on a llama of given shape (`scripts/bench-train.sh` runs
    /// PyTorch beside it).
    Train(lachesis::trainer::bench::TrainBenchArgs),
    /// Server-side cost of one ingested group, stage by stage.
    Codec {
        #[arg(long, default_value_t = 16)]
        seqs: usize,
        #[arg(long, default_value_t = 512)]
        tokens: usize,
        #[arg(long, default_value_t = 200)]
        rounds: usize,
    },
}

fn main() -> anyhow::Result<()> {
    // Before any thread starts: OpenBLAS (training's matrix products) reads it when loaded.
    lachesis_native::blas::quiet_idle_workers();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "lachesis=info,tower_http=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let file = match &cli.config {
        Some(path) => FileConfig::load(path)?,
        None => FileConfig::default(),
    };
    let runtime = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => serve(ServeConfig::resolve(*args, file)?).await,
            Command::Migrate { database_url } => {
                let url = database_url
                    .or(file.database_url)
                    .context("set DATABASE_URL or --database-url")?;
                let db = lachesis::db::connect(&url, 2).await?;
                lachesis::db::migrate(&db).await?;
                println!("migrations applied to {}", lachesis::db::redact(&url));
                Ok(())
            }
            Command::Env { command } => lachesis::envs::cli::run(command).await,
            Command::Chess { command } => lachesis::chess::cli::run(command),
            Command::Mcp { command } => lachesis::envs::mcp_tools::cli::run(command).await,
            Command::Protein { command } => lachesis::envs::protein_binder::cli::run(command).await,
            Command::Nim {
                command: NimCommand::Serve(args),
            } => lachesis::nim_serve::serve(args).await,
            Command::Arena { command } => lachesis::arena::cli::run(command),
            Command::Bench {
                which: BenchCommand::Arena(args),
            } => {
                let report = lachesis::arena::bench::run_arena_bench(&args)?;
                lachesis::arena::bench::print_arena_report(&report);
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::ArenaVotes(args),
            } => {
                let report = lachesis::arena::ingest_bench::run(&args).await?;
                lachesis::arena::ingest_bench::print_report(&args, &report);
                Ok(())
            }
            Command::Devchain(args) => lachesis::settlement::devchain_cli::run(&args).await,
            Command::Ledger { command } => {
                if lachesis::ledger::cli::run(command).await? {
                    Ok(())
                } else {
                    std::process::exit(1)
                }
            }
            Command::Bench {
                which: BenchCommand::PayToPlay(args),
            } => {
                let r = lachesis::envs::pay_to_play::bench::run(&args).await?;
                for (slug, quality, price) in &r.cards {
                    println!(
                        "card {slug:<18} price {:>8} USDC  true quality {quality:.3}",
                        lachesis_shared::ledger::MicroUsdc(*price)
                    );
                }
                println!(
                    "pay-to-play: {} episodes, panel {}: bandit {:.1} value/USDC over the second \
                     half, oracle ({}) {:.1}: {:.1}% of the oracle; spent {} USDC; picks {:?}",
                    r.episodes,
                    args.panel,
                    r.bandit_value_per_usdc,
                    r.oracle_panel.join(" + "),
                    r.oracle_value_per_usdc,
                    100.0 * r.ratio(),
                    r.spent,
                    r.picks
                );
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Ledger(args),
            } => {
                let r = lachesis::ledger::bench::run(&args).await?;
                println!(
                    "ledger: {} payers x {} payments{}: {} paid, {} refused for funds in {:.2} s = \
                     {:.0} payments/s; spent {} of {} USDC funded; reconcile: {} violations",
                    args.payers,
                    args.payments,
                    if args.shared_budget {
                        " from one budget"
                    } else {
                        ""
                    },
                    r.paid,
                    r.refused,
                    r.seconds,
                    r.payments_per_second(),
                    r.spent,
                    r.funded,
                    r.violations
                );
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Chess(args),
            } => {
                lachesis::chess::cli::bench_latency(args);
                Ok(())
            }
            Command::Train { command } => lachesis::trainer::cli::run(command).await,
            Command::Spatial { command } => lachesis::spatial::cli::run(command),
            Command::Bench {
                which:
                    BenchCommand::Codec {
                        seqs,
                        tokens,
                        rounds,
                    },
            } => {
                lachesis::bench::run_codec_bench(seqs, tokens, rounds);
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Train(args),
            } => {
                let r = lachesis::trainer::bench::run_train_bench(&args)?;
                println!(
                    "ours: {:.0} tokens/s ({:.4} s/step, {} trainable parameters)",
                    r.tokens_per_second, r.seconds_per_step, r.trainable_parameters
                );
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Api(args),
            } => {
                let reports = lachesis::bench::run_api_bench(args).await?;
                lachesis::bench::print_reports(&reports);
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Fanout(args),
            } => {
                let reports = lachesis::bench::fanout::run_fanout_bench(args).await?;
                lachesis::bench::fanout::print_fanout_reports(&reports);
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Generate(args),
            } => {
                let reports = lachesis::bench::generate::run_generate_bench(args).await?;
                lachesis::bench::generate::print_generate_reports(&reports);
                Ok(())
            }
            Command::Bench {
                which: BenchCommand::Protein(args),
            } => lachesis::bench::protein::run_protein_bench(&args).await,
            Command::Bench {
                which: BenchCommand::Mcp(args),
            } => {
                let report = lachesis::bench::mcp::run_mcp_bench(&args).await?;
                lachesis::bench::mcp::print_mcp_report(&report);
                Ok(())
            }
        }
    });
    // Dropping the runtime would wait for blocking tasks (a generation, a chess search): one that
    // is stuck must not hold the exit past `serve`'s shutdown deadline.
    runtime.shutdown_background();
    result
}

async fn serve(mut config: ServeConfig) -> anyhow::Result<()> {
    if !config.is_loopback() && config.api_token.is_none() {
        // Beyond loopback the API is never open: make a token and say it once.
        let token: String = (0..32)
            .map(|_| format!("{:02x}", rand::random::<u8>()))
            .collect();
        eprintln!(
            "Serving beyond loopback: API authentication is on. Token (set LACHESIS_API_TOKEN to choose one):"
        );
        eprintln!("{token}");
        config.api_token = Some(token);
    }
    let server = lachesis::app::Server::build(&config).await?;
    let addr = server.local_addr();
    // Caught before the address is announced: whoever reads it may stop us at once.
    let shutdown = lachesis::signals::shutdown_signal();
    tracing::info!(%addr, auth = config.api_token.is_some(), "serving");
    println!("Lachesis is serving on http://{addr}");
    server.run_until(shutdown).await
}
