//! `jb setup`: create the Python environment from the pinned requirements.

use clap::Args;

use crate::error::exit;

use super::GlobalOpts;
use crate::session;

#[derive(Debug, Args)]
pub struct SetupArgs {
    /// Reinstall even if the pins are unchanged.
    #[arg(long)]
    pub force: bool,
    /// Also install an optional extra: `ray` (for `--executor ray`, python/requirements-ray.txt).
    #[arg(long = "with", value_name = "EXTRA")]
    pub with: Vec<String>,
}

pub fn run(global: &GlobalOpts, args: SetupArgs) -> anyhow::Result<i32> {
    let project = session::project(&global.session())?;
    let variant = crate::pyenv::variant_for_backend(global.backend.map(|b| b.as_str()));
    let env = crate::pyenv::ensure(&project.pyenv, &project.python_dir, variant, args.force)?;
    println!(
        "{} Python environment {} (pins {}, Python {}{})",
        if env.installed { "created" } else { "reusing" },
        project.pyenv_dir.display(),
        env.id,
        env.version.dotted(),
        if env.is_fallback() {
            "; the fallback pins of python/py311/ for Python 3.11: jax 0.10.2"
        } else {
            ""
        }
    );
    for extra in &args.with {
        let added =
            crate::pyenv::ensure_extra(&project.pyenv, &project.python_dir, variant, extra)?;
        println!(
            "{} extra `{extra}` (python/requirements-{extra}.txt)",
            if added { "installed" } else { "reusing" }
        );
    }
    Ok(exit::OK)
}
