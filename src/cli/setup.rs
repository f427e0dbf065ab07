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
    let installed =
        crate::pyenv::ensure(&project.pyenv_dir, &project.python_dir, variant, args.force)?;
    let pins = crate::pyenv::pins_hash(&project.python_dir, variant)?;
    println!(
        "{} Python environment {} (pins {pins})",
        if installed { "created" } else { "reusing" },
        project.pyenv_dir.display()
    );
    for extra in &args.with {
        let added =
            crate::pyenv::ensure_extra(&project.pyenv_dir, &project.python_dir, variant, extra)?;
        println!(
            "{} extra `{extra}` (python/requirements-{extra}.txt)",
            if added { "installed" } else { "reusing" }
        );
    }
    Ok(exit::OK)
}
