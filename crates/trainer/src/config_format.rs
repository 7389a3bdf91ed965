//! The experiment config to and from its on-disk document, `bundle::config_v1::ConfigV1`
//! (`config.toml` version 1). Every conversion destructures both sides whole, so a field added
//! to a trainer section fails to compile here until version 1 (or a new version) says what it is.
//! Device and precision requests are strings in the document; they are parsed here, so a bad one
//! is an error naming its key like any other.

use bundle::config_v1::{
    AmpV1, BalanceV1, BatchSizeV1, CheckpointV1, ChooseV1, ConfigV1, DataV1, DeviceV1, DistributedV1, EarlyStoppingV1,
    MetricV1, OptimizerKindV1, OptimizerV1, ProgressV1, RecoveryV1, ScheduleKindV1, ScheduleV1, TrainingV1,
};
use device::{Choose, DeviceSpec, PrecisionSetting};

use crate::config::{
    AmpConfig, BatchSize, CheckpointConfig, DataConfig, DeviceConfig, EarlyStopping, ExperimentConfig, Invalid, Metric,
    OptimizerConfig, OptimizerKind, ProgressMode, RecoveryConfig, ScheduleConfig, ScheduleKind, TrainingConfig,
};
use crate::dist::config::{Balance, DistributedConfig};

impl From<ExperimentConfig> for ConfigV1 {
    fn from(c: ExperimentConfig) -> Self {
        let ExperimentConfig {
            config_version,
            name,
            task,
            data,
            synthetic,
            sentences,
            ctc,
            preprocess,
            augment,
            model,
            optimizer,
            schedule,
            training,
            checkpoint,
            device,
            amp,
            recovery,
            distributed,
        } = c;
        Self {
            config_version,
            name,
            task: task.into(),
            data: data.into(),
            synthetic: (&synthetic).into(),
            sentences: (&sentences).into(),
            ctc: (&ctc).into(),
            preprocess: (&preprocess).into(),
            augment: (&augment).into(),
            model: (&model).into(),
            optimizer: optimizer.into(),
            schedule: schedule.into(),
            training: training.into(),
            checkpoint: checkpoint.into(),
            device: device.into(),
            amp: amp.into(),
            recovery: recovery.into(),
            distributed: distributed.into(),
        }
    }
}

impl TryFrom<ConfigV1> for ExperimentConfig {
    type Error = Invalid;

    fn try_from(c: ConfigV1) -> Result<Self, Invalid> {
        let ConfigV1 {
            config_version,
            name,
            task,
            data,
            synthetic,
            sentences,
            ctc,
            preprocess,
            augment,
            model,
            optimizer,
            schedule,
            training,
            checkpoint,
            device,
            amp,
            recovery,
            distributed,
        } = c;
        Ok(Self {
            config_version,
            name,
            task: task.into(),
            data: data.into(),
            synthetic: synthetic.into(),
            sentences: sentences.into(),
            ctc: ctc.into(),
            preprocess: preprocess.into(),
            augment: augment.into(),
            model: model.into(),
            optimizer: optimizer.into(),
            schedule: schedule.into(),
            training: training.try_into()?,
            checkpoint: checkpoint.into(),
            device: device.try_into()?,
            amp: amp.into(),
            recovery: recovery.into(),
            distributed: distributed.into(),
        })
    }
}

impl From<DataConfig> for DataV1 {
    fn from(d: DataConfig) -> Self {
        let DataConfig {
            path,
            synthetic_dir,
            cache_dir,
            valid_fraction,
            split_seed,
            folds,
            fold,
            on_error,
            max_bad_fraction,
            workers,
            prefetch,
            device_prefetch,
        } = d;
        Self {
            path,
            synthetic_dir,
            cache_dir,
            valid_fraction,
            split_seed,
            folds,
            fold,
            on_error: on_error.into(),
            max_bad_fraction,
            workers,
            prefetch,
            device_prefetch,
        }
    }
}

impl From<DataV1> for DataConfig {
    fn from(d: DataV1) -> Self {
        let DataV1 {
            path,
            synthetic_dir,
            cache_dir,
            valid_fraction,
            split_seed,
            folds,
            fold,
            on_error,
            max_bad_fraction,
            workers,
            prefetch,
            device_prefetch,
        } = d;
        Self {
            path,
            synthetic_dir,
            cache_dir,
            valid_fraction,
            split_seed,
            folds,
            fold,
            on_error: on_error.into(),
            max_bad_fraction,
            workers,
            prefetch,
            device_prefetch,
        }
    }
}

impl From<OptimizerConfig> for OptimizerV1 {
    fn from(o: OptimizerConfig) -> Self {
        let OptimizerConfig { kind, lr, weight_decay, beta1, beta2, epsilon, momentum, nesterov, clip_grad_norm } = o;
        let kind = match kind {
            OptimizerKind::Adamw => OptimizerKindV1::Adamw,
            OptimizerKind::Sgd => OptimizerKindV1::Sgd,
        };
        Self { kind, lr, weight_decay, beta1, beta2, epsilon, momentum, nesterov, clip_grad_norm }
    }
}

impl From<OptimizerV1> for OptimizerConfig {
    fn from(o: OptimizerV1) -> Self {
        let OptimizerV1 { kind, lr, weight_decay, beta1, beta2, epsilon, momentum, nesterov, clip_grad_norm } = o;
        let kind = match kind {
            OptimizerKindV1::Adamw => OptimizerKind::Adamw,
            OptimizerKindV1::Sgd => OptimizerKind::Sgd,
        };
        Self { kind, lr, weight_decay, beta1, beta2, epsilon, momentum, nesterov, clip_grad_norm }
    }
}

impl From<ScheduleConfig> for ScheduleV1 {
    fn from(s: ScheduleConfig) -> Self {
        let ScheduleConfig { kind, warmup_steps, warmup_epochs, min_lr, step_size, gamma } = s;
        let kind = match kind {
            ScheduleKind::Cosine => ScheduleKindV1::Cosine,
            ScheduleKind::Constant => ScheduleKindV1::Constant,
            ScheduleKind::Step => ScheduleKindV1::Step,
        };
        Self { kind, warmup_steps, warmup_epochs, min_lr, step_size, gamma }
    }
}

impl From<ScheduleV1> for ScheduleConfig {
    fn from(s: ScheduleV1) -> Self {
        let ScheduleV1 { kind, warmup_steps, warmup_epochs, min_lr, step_size, gamma } = s;
        let kind = match kind {
            ScheduleKindV1::Cosine => ScheduleKind::Cosine,
            ScheduleKindV1::Constant => ScheduleKind::Constant,
            ScheduleKindV1::Step => ScheduleKind::Step,
        };
        Self { kind, warmup_steps, warmup_epochs, min_lr, step_size, gamma }
    }
}

impl From<TrainingConfig> for TrainingV1 {
    fn from(t: TrainingConfig) -> Self {
        let TrainingConfig {
            epochs,
            batch_size,
            effective_batch_size,
            max_batch_size,
            precision,
            empty_cache_interval,
            profile,
            accumulation_steps,
            label_smoothing,
            seed,
            drop_last,
            max_steps,
            late_dropout_epoch,
            log_every,
            early_stopping,
            progress,
            out_dir,
        } = t;
        let EarlyStopping { metric, patience, min_delta } = early_stopping;
        let metric = match metric {
            Metric::ValidLoss => MetricV1::ValidLoss,
            Metric::ValidTop1 => MetricV1::ValidTop1,
            Metric::ValidCer => MetricV1::ValidCer,
        };
        Self {
            epochs,
            batch_size: match batch_size {
                BatchSize::Auto => BatchSizeV1::Auto,
                BatchSize::Fixed(n) => BatchSizeV1::Fixed(n),
            },
            effective_batch_size,
            max_batch_size,
            precision: precision.to_string(),
            empty_cache_interval,
            profile,
            accumulation_steps,
            label_smoothing,
            seed,
            drop_last,
            max_steps,
            late_dropout_epoch,
            log_every,
            early_stopping: EarlyStoppingV1 { metric, patience, min_delta },
            progress: match progress {
                ProgressMode::Auto => ProgressV1::Auto,
                ProgressMode::Bar => ProgressV1::Bar,
                ProgressMode::Plain => ProgressV1::Plain,
                ProgressMode::Off => ProgressV1::Off,
            },
            out_dir,
        }
    }
}

impl TryFrom<TrainingV1> for TrainingConfig {
    type Error = Invalid;

    fn try_from(t: TrainingV1) -> Result<Self, Invalid> {
        let TrainingV1 {
            epochs,
            batch_size,
            effective_batch_size,
            max_batch_size,
            precision,
            empty_cache_interval,
            profile,
            accumulation_steps,
            label_smoothing,
            seed,
            drop_last,
            max_steps,
            late_dropout_epoch,
            log_every,
            early_stopping,
            progress,
            out_dir,
        } = t;
        let EarlyStoppingV1 { metric, patience, min_delta } = early_stopping;
        let metric = match metric {
            MetricV1::ValidLoss => Metric::ValidLoss,
            MetricV1::ValidTop1 => Metric::ValidTop1,
            MetricV1::ValidCer => Metric::ValidCer,
        };
        Ok(Self {
            epochs,
            batch_size: match batch_size {
                BatchSizeV1::Auto => BatchSize::Auto,
                BatchSizeV1::Fixed(n) => BatchSize::Fixed(n),
            },
            effective_batch_size,
            max_batch_size,
            precision: precision
                .parse::<PrecisionSetting>()
                .map_err(|e| ("training.precision".to_string(), e.to_string()))?,
            empty_cache_interval,
            profile,
            accumulation_steps,
            label_smoothing,
            seed,
            drop_last,
            max_steps,
            late_dropout_epoch,
            log_every,
            early_stopping: EarlyStopping { metric, patience, min_delta },
            progress: match progress {
                ProgressV1::Auto => ProgressMode::Auto,
                ProgressV1::Bar => ProgressMode::Bar,
                ProgressV1::Plain => ProgressMode::Plain,
                ProgressV1::Off => ProgressMode::Off,
            },
            out_dir,
        })
    }
}

impl From<CheckpointConfig> for CheckpointV1 {
    fn from(c: CheckpointConfig) -> Self {
        let CheckpointConfig { every_steps, gpu_every_steps, keep_last } = c;
        Self { every_steps, gpu_every_steps, keep_last }
    }
}

impl From<CheckpointV1> for CheckpointConfig {
    fn from(c: CheckpointV1) -> Self {
        let CheckpointV1 { every_steps, gpu_every_steps, keep_last } = c;
        Self { every_steps, gpu_every_steps, keep_last }
    }
}

impl From<DeviceConfig> for DeviceV1 {
    fn from(d: DeviceConfig) -> Self {
        let DeviceConfig { device, choose, prefer, min_free_memory_mib, allow_software_wgpu } = d;
        let choose = match choose {
            Choose::Ranked => ChooseV1::Ranked,
            Choose::Fastest => ChooseV1::Fastest,
        };
        Self { device: device.to_string(), choose, prefer, min_free_memory_mib, allow_software_wgpu }
    }
}

impl TryFrom<DeviceV1> for DeviceConfig {
    type Error = Invalid;

    fn try_from(d: DeviceV1) -> Result<Self, Invalid> {
        let DeviceV1 { device, choose, prefer, min_free_memory_mib, allow_software_wgpu } = d;
        let device = device.parse::<DeviceSpec>().map_err(|e| ("device.device".to_string(), e.to_string()))?;
        let choose = match choose {
            ChooseV1::Ranked => Choose::Ranked,
            ChooseV1::Fastest => Choose::Fastest,
        };
        Ok(Self { device, choose, prefer, min_free_memory_mib, allow_software_wgpu })
    }
}

impl From<AmpConfig> for AmpV1 {
    fn from(a: AmpConfig) -> Self {
        let AmpConfig { init_scale, growth_factor, growth_interval, backoff_factor, min_scale } = a;
        Self { init_scale, growth_factor, growth_interval, backoff_factor, min_scale }
    }
}

impl From<AmpV1> for AmpConfig {
    fn from(a: AmpV1) -> Self {
        let AmpV1 { init_scale, growth_factor, growth_interval, backoff_factor, min_scale } = a;
        Self { init_scale, growth_factor, growth_interval, backoff_factor, min_scale }
    }
}

impl From<RecoveryConfig> for RecoveryV1 {
    fn from(r: RecoveryConfig) -> Self {
        let RecoveryConfig { max_consecutive_bad, max_rollbacks, lr_cut, snapshot_every, max_device_faults } = r;
        Self { max_consecutive_bad, max_rollbacks, lr_cut, snapshot_every, max_device_faults }
    }
}

impl From<RecoveryV1> for RecoveryConfig {
    fn from(r: RecoveryV1) -> Self {
        let RecoveryV1 { max_consecutive_bad, max_rollbacks, lr_cut, snapshot_every, max_device_faults } = r;
        Self { max_consecutive_bad, max_rollbacks, lr_cut, snapshot_every, max_device_faults }
    }
}

impl From<DistributedConfig> for DistributedV1 {
    fn from(d: DistributedConfig) -> Self {
        let DistributedConfig {
            devices,
            balance,
            shares,
            rebalance_every,
            nodes,
            node_rank,
            orchestrator,
            node_address,
            data_port,
            timeout_s,
            secret_file,
            insecure,
        } = d;
        let balance = match balance {
            Balance::Equal => BalanceV1::Equal,
            Balance::Measured => BalanceV1::Measured,
            Balance::Fixed => BalanceV1::Fixed,
        };
        Self {
            devices,
            balance,
            shares,
            rebalance_every,
            nodes,
            node_rank,
            orchestrator,
            node_address,
            data_port,
            timeout_s,
            secret_file,
            insecure,
        }
    }
}

impl From<DistributedV1> for DistributedConfig {
    fn from(d: DistributedV1) -> Self {
        let DistributedV1 {
            devices,
            balance,
            shares,
            rebalance_every,
            nodes,
            node_rank,
            orchestrator,
            node_address,
            data_port,
            timeout_s,
            secret_file,
            insecure,
        } = d;
        let balance = match balance {
            BalanceV1::Equal => Balance::Equal,
            BalanceV1::Measured => Balance::Measured,
            BalanceV1::Fixed => Balance::Fixed,
        };
        Self {
            devices,
            balance,
            shares,
            rebalance_every,
            nodes,
            node_rank,
            orchestrator,
            node_address,
            data_port,
            timeout_s,
            secret_file,
            insecure,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_section_survives_the_document_both_ways() {
        let mut cfg = ExperimentConfig::default();
        cfg.training.batch_size = BatchSize::Auto;
        cfg.training.precision = PrecisionSetting::Bf16;
        cfg.training.progress = ProgressMode::Plain;
        cfg.training.early_stopping.metric = Metric::ValidLoss;
        cfg.device.device = DeviceSpec::Cuda(Some(1));
        cfg.device.choose = Choose::Fastest;
        cfg.optimizer.kind = OptimizerKind::Sgd;
        cfg.schedule.kind = ScheduleKind::Step;
        cfg.distributed.balance = Balance::Measured;
        cfg.distributed.devices = vec!["cpu".into(), "wgpu".into()];
        cfg.data.on_error = data::dataset::OnError::Fail;
        cfg.task = models::Task::Ctc;
        let doc = ConfigV1::from(cfg.clone());
        assert_eq!(doc.device.device, "cuda:1");
        assert_eq!(doc.training.precision, "bf16");
        assert_eq!(ExperimentConfig::try_from(doc).unwrap(), cfg);
    }

    #[test]
    fn bad_device_and_precision_strings_name_their_keys() {
        let mut doc = ConfigV1::default();
        doc.device.device = "tpu".into();
        let (key, message) = ExperimentConfig::try_from(doc).unwrap_err();
        assert_eq!(key, "device.device");
        assert!(message.contains("unknown device kind `tpu`"), "{message}");

        let mut doc = ConfigV1::default();
        doc.training.precision = "f8".into();
        let (key, message) = ExperimentConfig::try_from(doc).unwrap_err();
        assert_eq!(key, "training.precision");
        assert!(message.contains("f8"), "{message}");
    }
}
