//! Burn `DataLoader`s over a SignFlow dataset split, for burn-train's `SupervisedTraining`.

use std::sync::Arc;

use burn::data::dataloader::{DataLoader, DataLoaderBuilder};
use burn::tensor::backend::AutodiffBackend;
use data::augment::{AugmentConfig, Augmenter};
use data::dataset::{DatasetSplit, Item, SignDataset};
use data::loader::{ItemBatcher, SignBatch};
use data::preprocess::Preprocessor;

use crate::{LearnError, Result};

/// How the loaders batch.
#[derive(Debug, Clone)]
pub struct LoaderSettings {
    /// Sequences per batch (both splits).
    pub batch_size: usize,
    /// Burn loader worker threads (0 = batches are made on the training thread, in order).
    pub workers: usize,
    /// Seed of the training split's shuffle and augmentation draws.
    pub seed: u64,
    /// Augmentation of training batches (`None` or `enabled = false`: none).
    pub augment: Option<AugmentConfig>,
}

impl Default for LoaderSettings {
    fn default() -> Self {
        Self { batch_size: 32, workers: 2, seed: 0, augment: Some(AugmentConfig::default()) }
    }
}

/// The two loaders `SupervisedTraining::new` takes: training batches on the autodiff backend,
/// validation batches on its inner backend (no graph).
pub struct Loaders<B: AutodiffBackend> {
    /// Shuffled (seeded per epoch by Burn), augmented.
    pub train: Arc<dyn DataLoader<B, SignBatch<B>>>,
    /// Not augmented; in split order with `workers = 0` (Burn's worker threads hand batches on
    /// as they are ready).
    pub valid: Arc<dyn DataLoader<B::InnerBackend, SignBatch<B::InnerBackend>>>,
}

impl<B: AutodiffBackend> std::fmt::Debug for Loaders<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaders")
            .field("train_items", &self.train.num_items())
            .field("valid_items", &self.valid.num_items())
            .finish()
    }
}

/// Loaders for the `train` and `valid` positions of `ds` (as `SignDataset::split_by_group`
/// returns them), batched by SignFlow's [`ItemBatcher`]: the trainer's stage-2 preprocessing
/// and augmentation, one random stream per sample, so batches do not depend on worker count.
/// Refuses empty splits, a zero batch size, positions outside the dataset and continuous
/// (CTC) datasets, whose targets a classification output cannot carry.
pub fn loaders<B: AutodiffBackend>(
    ds: &Arc<SignDataset>,
    pre: &Arc<Preprocessor>,
    train: &[usize],
    valid: &[usize],
    settings: &LoaderSettings,
    device: &B::Device,
) -> Result<Loaders<B>> {
    if ds.continuous.is_some() {
        return Err(LearnError::Invalid(
            "the dataset is continuous (token sequences per recording); burn-train's classification output needs one sign per sequence: train it with SignFlow's trainer (task = \"ctc\")".into(),
        ));
    }
    if settings.batch_size == 0 {
        return Err(LearnError::Invalid("batch_size is 0; expected at least 1".into()));
    }
    for (name, split) in [("training", train), ("validation", valid)] {
        if split.is_empty() {
            return Err(LearnError::Invalid(format!("the {name} split is empty")));
        }
        if let Some(&bad) = split.iter().find(|&&i| i >= ds.items.len()) {
            return Err(LearnError::Invalid(format!(
                "the {name} split names item {bad}, but the dataset has {} items",
                ds.items.len()
            )));
        }
    }
    let augmenter = settings
        .augment
        .as_ref()
        .filter(|a| a.enabled)
        .map(|a| Arc::new(Augmenter::new(a.clone(), ds.mirror_table(pre))));
    let plain = ItemBatcher { preprocessor: pre.clone(), augmenter: None, seed: settings.seed };
    let augmented = ItemBatcher { augmenter, ..plain.clone() };
    let split = |indices: &[usize]| DatasetSplit { data: ds.clone(), indices: indices.to_vec() };
    let train = DataLoaderBuilder::<B, Item, SignBatch<B>>::new(augmented)
        .batch_size(settings.batch_size)
        .shuffle(settings.seed)
        .num_workers(settings.workers)
        .set_device(device.clone())
        .build(split(train));
    let valid = DataLoaderBuilder::<B::InnerBackend, Item, SignBatch<B::InnerBackend>>::new(plain)
        .batch_size(settings.batch_size)
        .num_workers(settings.workers)
        .set_device(device.clone())
        .build(split(valid));
    Ok(Loaders { train, valid })
}
