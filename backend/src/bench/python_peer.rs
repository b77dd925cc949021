//! The Python side of a bench that runs a Python reference next to ours: the interpreter and the
//! script it runs. Each reference imports its own packages, so each bench has its own venv and
//! its own variable naming it; [`PythonPeerDefaults`] gives those, one impl per bench.

use std::marker::PhantomData;
use std::path::PathBuf;

/// Where one bench's Python and script are found when the flags are not given. Implemented by
/// the bench's own arguments, which flatten in a [`PythonPeerArgs<Self>`].
pub trait PythonPeerDefaults {
    /// The variable that names the interpreter when `--python` is not given.
    const PYTHON_ENV: &'static str;
    /// The interpreter when neither is given: a venv under the repository, which one of the
    /// `scripts/ensure-*.sh` makes (the bench names it when the interpreter cannot be run).
    const PYTHON: &'static str;
    /// `--python`'s help: what that interpreter must have installed.
    const PYTHON_HELP: &'static str;
    /// The script when its flag is not given, relative to the repository.
    const SCRIPT: &'static str;
    /// The script's flag; the MCP bench's is `client-script`, which its wrapper script passes.
    const SCRIPT_FLAG: &'static str = "script";
}

/// `--python` and the script it runs, with the defaults of the bench `D`.
#[derive(Debug, Clone, clap::Args)]
pub struct PythonPeerArgs<D: PythonPeerDefaults> {
    #[arg(long, env = D::PYTHON_ENV, default_value = D::PYTHON, help = D::PYTHON_HELP)]
    pub python: PathBuf,
    /// The script that Python runs.
    #[arg(long = D::SCRIPT_FLAG, default_value = D::SCRIPT)]
    pub script: PathBuf,
    /// `D` only chooses the defaults above; nothing of it is kept.
    #[arg(skip)]
    defaults: PhantomData<D>,
}
