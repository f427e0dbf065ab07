//! `--executor ray` in a session: its settings, the executor and the cluster's fingerprint.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::config::ProjectConfig;
use crate::error::{JbError, Result};
use crate::exec::python::{PythonExecutor, UntrustedPolicy};
use crate::exec::ray::{RayConfig, RayExecutor};
use crate::project::Project;

use super::{worker_spec, ExecutorKind, Options};

/// The Ray settings when the executor is `ray` (options and environment, then jb.yaml).
pub fn settings(opts: &Options, project: &Project) -> Result<Option<RayConfig>> {
    let config = ProjectConfig::load(&project.root)?;
    let kind = match (opts.executor, config.executor.as_deref()) {
        (Some(k), _) => k,
        (None, None | Some("local")) => ExecutorKind::Local,
        (None, Some("ray")) => ExecutorKind::Ray,
        (None, Some(other)) => {
            return Err(JbError::Usage(format!(
                "{}: executor `{other}`: expected `local` or `ray`",
                project.root.join(crate::config::FILE).display()
            )))
        }
    };
    if kind == ExecutorKind::Local {
        return Ok(None);
    }
    let address = opts
        .ray_address
        .clone()
        .or(config.ray.address.clone())
        .ok_or_else(|| {
            JbError::Usage(
                "--executor ray needs the cluster's address: --ray-address HOST:PORT, the \
                 environment variable JB_RAY_ADDRESS, or `ray: {address: ...}` in jb.yaml"
                    .into(),
            )
        })?;
    let device_resource =
        config
            .ray
            .device_resource
            .clone()
            .unwrap_or_else(|| match opts.backend {
                Some(b) => RayConfig::default_device_resource(b.as_str()).to_string(),
                None => "auto".to_string(),
            });
    Ok(Some(RayConfig {
        address,
        device_resource,
        cpu_slots: config.ray.cpu_slots.unwrap_or(1).max(1),
        max_attempts: config.ray.max_attempts.unwrap_or(3).max(1),
    }))
}

fn variant(opts: &Options) -> &'static str {
    crate::pyenv::variant_for_backend(opts.backend.map(|b| b.as_str()))
}

fn fingerprint_file(project: &Project) -> PathBuf {
    project.cache_dir.join("fingerprint-ray.json")
}

/// The executor (it contacts the cluster only when a step must run or a fingerprint is needed).
pub fn executor(
    opts: &Options,
    project: &Project,
    cfg: RayConfig,
    env: &[(String, String)],
) -> Arc<RayExecutor> {
    // Candidate steps stay on this machine, in the sandbox (see RayExecutor::with_untrusted).
    let untrusted =
        PythonExecutor::new(worker_spec(project, env)).with_untrusted(UntrustedPolicy {
            no_sandbox: opts.no_sandbox,
            cache_dir: project.cache_dir.clone(),
            pyenv: project.pyenv_dir.clone(),
        });
    let mut ex = RayExecutor::new(cfg, worker_spec(project, env)).with_untrusted(untrusted);
    let stale = fingerprint_file(project);
    ex.on_mismatch = Some(Box::new(move || {
        let _ = std::fs::remove_file(&stale);
    }));
    let (pyenv, python_dir, variant) = (
        project.pyenv.clone(),
        project.python_dir.clone(),
        variant(opts),
    );
    ex.before_start = Some(Box::new(move || {
        crate::pyenv::ensure_extra(&pyenv, &python_dir, variant, "ray")
            .map(|_| ())
            .map_err(|e| e.to_string())
    }));
    Arc::new(ex)
}

/// Make sure this machine's environment has Ray (the driver runs in it).
pub fn ensure_env(opts: &Options, project: &Project) -> Result<()> {
    crate::pyenv::ensure_extra(&project.pyenv, &project.python_dir, variant(opts), "ray")?;
    Ok(())
}

/// The fingerprint of the cluster's judges (what keys of Python steps include), cached in
/// `fingerprint-ray.json` for this address, pins and environment; `None` when not cached and
/// `may_start` is false.
pub fn fingerprint(
    opts: &Options,
    project: &Project,
    env: &[(String, String)],
    ray: &RayExecutor,
    may_start: bool,
) -> Result<Option<BTreeMap<String, String>>> {
    let pins = match crate::pyenv::ready(&project.pyenv_dir, &project.python_dir, variant(opts))? {
        Some(id) => id,
        None if !may_start => return Ok(None),
        None => {
            ensure_env(opts, project)?;
            crate::pyenv::ready(&project.pyenv_dir, &project.python_dir, variant(opts))?
                .unwrap_or_default()
        }
    };
    let mut probe = crate::fingerprint::probe(&pins, env);
    probe.insert("ray_address".into(), ray.cfg.address.clone());
    let path = fingerprint_file(project);
    if let Some(fp) = crate::fingerprint::cached_at(&path, &probe) {
        ray.set_expected_fingerprint(&fp);
        return Ok(Some(fp));
    }
    if !may_start {
        return Ok(None);
    }
    ensure_env(opts, project)?;
    let fp = ray
        .cluster_fingerprint(&project.root)
        .map_err(|e| JbError::Cluster(e.to_string()))?;
    std::fs::create_dir_all(&project.cache_dir).map_err(|e| JbError::io(&project.cache_dir, e))?;
    crate::fingerprint::store_at(&path, &probe, &fp)?;
    ray.set_expected_fingerprint(&fp);
    Ok(Some(fp))
}
