//! `device`: inspect what SignFlow can compute on.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};
use device::inventory::{gib, Inventory};
use device::{DeviceSpec, Selection, SelectionPolicy};
use serde_json::json;

/// Probe CUDA, WGPU and CPU devices and show what SignFlow would use.
#[derive(Parser)]
#[command(name = "device", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the inventory and what `auto` selects, with the reason for every skipped candidate.
    List {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// Print what a device spec resolves to.
    Select {
        /// auto, cpu, cuda, cuda:N, wgpu, wgpu:N
        #[arg(long, default_value = "auto")]
        device: DeviceSpec,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// Run a real matmul on the device and report memory before and after emptying the cache.
    Check {
        #[arg(long, default_value = "auto")]
        device: DeviceSpec,
        /// Matrix side length.
        #[arg(long, default_value_t = 1024)]
        size: usize,
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        policy: PolicyArgs,
    },
    /// Sample GPU utilization, memory, temperature and power through NVML.
    Monitor {
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
        #[arg(long, default_value_t = 5.0)]
        duration_s: f64,
        /// CSV file to write the samples to.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Args)]
struct PolicyArgs {
    /// Preferred GPU (name fragment or CUDA ordinal); repeatable, most preferred first.
    #[arg(long)]
    prefer: Vec<String>,
    /// Skip GPUs with less free memory than this (MiB).
    #[arg(long, default_value_t = 0)]
    min_free_mib: u64,
    /// Let `auto` use a software WGPU adapter instead of the CPU backend.
    #[arg(long)]
    allow_software_wgpu: bool,
}

impl PolicyArgs {
    fn policy(&self) -> SelectionPolicy {
        SelectionPolicy {
            prefer: self.prefer.clone(),
            min_free_memory_mib: self.min_free_mib,
            allow_software_wgpu: self.allow_software_wgpu,
        }
    }
}

fn main() -> std::process::ExitCode {
    device::keep_freed_memory();
    device::quiet_headless_env();
    // Before any device is used: cubecl's caches in the per-user directory the trainer uses.
    if let Some(w) = &device::runtime::configure(None, None).warning {
        w.lines().for_each(|line| eprintln!("warning: {line}"));
    }
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match cli.command {
        Command::List { json, policy } => {
            let inv = device::probe();
            let auto = device::select(&DeviceSpec::Auto, &inv, &policy.policy())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&json!({ "inventory": inv, "auto": auto }))?);
            } else {
                print_inventory(&inv);
                println!();
                print_selection(&auto);
            }
        }
        Command::Select { device, json, policy } => {
            let inv = device::probe();
            let sel = device::select(&device, &inv, &policy.policy())?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sel)?);
            } else {
                print_selection(&sel);
            }
        }
        Command::Check { device, size, json, policy } => check(&device, size, json, &policy.policy())?,
        Command::Monitor { interval_ms, duration_s, out } => {
            let mon = device::GpuMonitor::start(Duration::from_millis(interval_ms), out.as_deref())?;
            if mon.is_available() {
                std::thread::sleep(Duration::from_secs_f64(duration_s.max(0.0)));
            }
            let summary = mon.stop();
            println!("{}", serde_json::to_string_pretty(&summary)?);
            if let (Some(out), true) = (&out, summary.available) {
                eprintln!("samples written to {}", out.display());
            }
        }
    }
    Ok(())
}

fn check(spec: &DeviceSpec, size: usize, json: bool, policy: &SelectionPolicy) -> Result<()> {
    let selected = device::resolve(spec, policy)?;
    let dev = &selected.device;
    let before = device::memory_stats(dev);
    let t0 = std::time::Instant::now();
    let err = device::matmul_check(dev, size).map_err(anyhow::Error::msg).context("matmul on the selected device")?;
    let elapsed = t0.elapsed();
    let after_work = device::memory_stats(dev);
    let emptied = device::empty_cache(dev);
    let after_empty = device::memory_stats(dev);
    let report = json!({
        "device": selected.selection.name,
        "backend": device::backend_name(dev),
        "matmul": { "size": size, "max_abs_error": err, "seconds_including_warmup": elapsed.as_secs_f64() },
        "memory": { "before": before, "after_work": after_work, "after_empty_cache": after_empty, "cache_emptied": emptied },
        "amp": selected.selection.capabilities.amp,
    });
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("device: {} [{}]", selected.selection.name, device::backend_name(dev));
        println!("matmul {size}x{size}: max abs error {err:e} ({:.3} s incl. warm-up)", elapsed.as_secs_f64());
        match (after_work, after_empty) {
            (Some(w), Some(e)) => println!(
                "memory: in use {} B / reserved {} B after work; in use {} B / reserved {} B after empty_cache",
                w.bytes_in_use, w.bytes_reserved, e.bytes_in_use, e.bytes_reserved
            ),
            _ => println!("memory: this backend keeps no pool statistics (CPU uses the system allocator)"),
        }
    }
    anyhow::ensure!(err < 1e-2, "matmul result is wrong: max abs error {err}");
    Ok(())
}

fn print_inventory(inv: &Inventory) {
    println!("CUDA: {:?}", inv.cuda.status);
    if let Some(v) = &inv.cuda.visible_devices {
        println!("  CUDA_VISIBLE_DEVICES={v:?}");
    }
    if let Some(p) = &inv.cuda.toolkit_path {
        println!("  toolkit: {p}");
    }
    for g in &inv.cuda.gpus {
        println!(
            "  cuda:{} {}  cc {}.{}  {} free / {} total  score {:.1}",
            g.ordinal,
            g.name,
            g.compute_capability.0,
            g.compute_capability.1,
            gib(g.free_memory_bytes),
            gib(g.total_memory_bytes),
            device::select::cuda_score(g)
        );
    }
    match &inv.wgpu.unavailable {
        Some(why) => println!("WGPU: {why}"),
        None => {
            println!("WGPU: {} adapter(s)", inv.wgpu.adapters.len());
            for a in &inv.wgpu.adapters {
                println!(
                    "  wgpu:{} {} [{} {:?}{}] f16={} driver={}",
                    a.index,
                    a.name,
                    a.backend,
                    a.kind,
                    if a.software { ", software" } else { "" },
                    a.shader_f16,
                    a.driver
                );
            }
        }
    }
    let c = &inv.cpu;
    println!(
        "CPU: {} ({} threads{}), {} total / {} available; backend {} (f16 {}, bf16 {})",
        c.model,
        c.logical_cores,
        c.physical_cores.map(|p| format!(", {p} cores")).unwrap_or_default(),
        gib(c.total_memory_bytes),
        gib(c.available_memory_bytes),
        c.backend,
        c.supports_f16,
        c.supports_bf16
    );
}

fn print_selection(sel: &Selection) {
    println!("{} -> {} ({})", sel.spec, sel.name, sel.reason);
    for s in &sel.skipped {
        println!("  skipped: {s}");
    }
    let dtypes: Vec<String> = sel
        .capabilities
        .dtypes
        .iter()
        .map(|d| {
            format!(
                "{}{}",
                d.dtype,
                if !d.usable {
                    " (unusable)"
                } else if d.fast {
                    " (fast)"
                } else {
                    " (slow)"
                }
            )
        })
        .collect();
    println!("  dtypes: {}", dtypes.join(", "));
    println!("  mixed precision (auto): {} — {}", sel.capabilities.amp, sel.capabilities.amp_reason);
}
