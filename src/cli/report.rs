//! `jb report`: tables, plots and the html report of what the run database holds (runs nothing).

use std::path::PathBuf;

use clap::Args;

use crate::cache::Cache;
use crate::error::{exit, JbError};
use crate::report::{self, Format};

use super::GlobalOpts;
use crate::session;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Output format(s): md, csv, json, html (repeat or comma-separate; default: all four).
    #[arg(long, short = 'f', value_delimiter = ',', value_parser = ["md", "csv", "json", "html"])]
    pub format: Vec<String>,
    /// Output folder (default: `<cache-dir>/report/`); `-` prints one format to stdout.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
}

pub fn run(global: &GlobalOpts, args: ReportArgs) -> anyhow::Result<i32> {
    let project = session::project(&global.session())?;
    let mut formats = args
        .format
        .iter()
        .map(|f| Format::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    formats.sort();
    formats.dedup();
    let to_stdout = args.out.as_deref() == Some(std::path::Path::new("-"));
    if formats.is_empty() {
        if to_stdout {
            formats = vec![Format::Md];
        } else {
            formats = Format::ALL.to_vec();
        }
    }
    if to_stdout && (formats.len() != 1 || formats[0] == Format::Csv) {
        return Err(JbError::Usage(
            "--out - prints exactly one of md, json or html (csv is several files)".into(),
        )
        .into());
    }
    let cache = Cache::open(&project.cache_dir)?;
    let scale = global.scale.map(|s| s.as_str().to_string());
    let report = report::from_cache_at(&cache, Some(&project), scale.as_deref())?;
    if to_stdout {
        let files = report::render(&report, formats[0])?;
        print!("{}", files[0].content);
        return Ok(exit::OK);
    }
    let dir = args
        .out
        .map(|d| crate::project::absolute(&d))
        .unwrap_or_else(|| project.cache_dir.join("report"));
    let mut written = Vec::new();
    for f in formats {
        written.extend(report::write(&dir, &report::render(&report, f)?)?);
    }
    if global.json {
        let out = report::written::Written::new(dir, written, &report);
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("{}", report::markdown::summary_line(&report));
        for p in &written {
            println!("  {}", p.display());
        }
    }
    Ok(exit::OK)
}
