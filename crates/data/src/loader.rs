//! Batching: host-side batches built on worker threads (augmentation + preprocessing stage 2)
//! and prefetched, so the device never waits on the data; one upload per batch.

use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Arc;
use std::thread::JoinHandle;

use burn::data::dataloader::batcher::Batcher;
use burn::prelude::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::augment::Augmenter;
use crate::dataset::{Item, SignDataset};
use crate::index::{fnv1a, FNV_OFFSET};
use crate::preprocess::Preprocessor;
use crate::sequence::Prepared;

/// A batch in host memory: `inputs [batch, window, features]`, `pad_mask [batch, window]`
/// (true = padding), `labels [batch]`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostBatch {
    /// Sequences.
    pub batch: usize,
    /// Frames per sequence.
    pub window: usize,
    /// Features per frame.
    pub features: usize,
    /// `[batch, window, features]`, row-major.
    pub inputs: Vec<f32>,
    /// `[batch, window]`, true = padding.
    pub pad_mask: Vec<bool>,
    /// `[batch]` class indices.
    pub labels: Vec<i64>,
    /// Continuous datasets: each sequence's token classes (empty for classification).
    pub targets: Vec<Vec<usize>>,
    /// Positions of the items in the dataset, in batch order.
    pub indices: Vec<usize>,
}

/// A batch on a device.
#[derive(Debug, Clone)]
pub struct SignBatch<B: Backend> {
    /// `[batch, window, features]`.
    pub inputs: Tensor<B, 3>,
    /// `[batch, window]`, true = padding.
    pub pad_mask: Tensor<B, 2, Bool>,
    /// `[batch]` class indices.
    pub labels: Tensor<B, 1, Int>,
    /// Continuous datasets: each sequence's token classes (host side: the CTC loss runs there).
    pub targets: Vec<Vec<usize>>,
    /// Valid (non-padding) frames of each sequence.
    pub lengths: Vec<usize>,
}

impl HostBatch {
    /// Stack prepared windows (all the same shape) with their labels and token sequences
    /// (`targets`: one per window, empty for classification).
    pub fn from_prepared(
        prepared: &[Prepared],
        labels: &[usize],
        targets: Vec<Vec<usize>>,
        indices: Vec<usize>,
    ) -> Self {
        let (window, features) = prepared.first().map(|p| (p.window, p.features)).unwrap_or((0, 0));
        let mut inputs = Vec::with_capacity(prepared.len() * window * features);
        let mut pad_mask = Vec::with_capacity(prepared.len() * window);
        for p in prepared {
            assert_eq!((p.window, p.features), (window, features), "prepared windows in one batch differ in shape");
            inputs.extend_from_slice(&p.data);
            pad_mask.extend(p.pad_mask());
        }
        Self {
            batch: prepared.len(),
            window,
            features,
            inputs,
            pad_mask,
            labels: labels.iter().map(|&l| l as i64).collect(),
            targets,
            indices,
        }
    }

    /// Valid (non-padding) frames of each sequence.
    pub fn lengths(&self) -> Vec<usize> {
        valid_lengths(&self.pad_mask, self.window)
    }

    /// Copy the batch to `device`.
    pub fn to_device<B: Backend>(&self, device: &B::Device) -> SignBatch<B> {
        SignBatch {
            inputs: Tensor::from_data(
                TensorData::new(self.inputs.clone(), [self.batch, self.window, self.features]),
                device,
            ),
            pad_mask: Tensor::from_data(TensorData::new(self.pad_mask.clone(), [self.batch, self.window]), device),
            labels: Tensor::from_data(TensorData::new(self.labels.clone(), [self.batch]), device),
            targets: self.targets.clone(),
            lengths: self.lengths(),
        }
    }
}

/// Valid (non-padding) frames of each row of a `[batch, window]` padding mask (true = padding).
pub fn valid_lengths(pad_mask: &[bool], window: usize) -> Vec<usize> {
    pad_mask.chunks(window.max(1)).map(|m| m.iter().filter(|p| !**p).count()).collect()
}

/// Turns dataset items into host batches (augmentation + preprocessing stage 2).
///
/// It is also Burn's [`Batcher`] (`Item`s in, a [`SignBatch`] on the device out), so a
/// [`crate::dataset::DatasetSplit`] (Burn's `Dataset`) plugs into Burn's `DataLoaderBuilder`. The
/// trainer uses [`EpochLoader`] instead: Burn's loader cannot restart mid-epoch with the same
/// batches (resume), and it uploads on the worker threads one batch at a time.
#[derive(Debug, Clone)]
pub struct ItemBatcher {
    /// Stage 2 of preprocessing (and stage 1 for uncached items).
    pub preprocessor: Arc<Preprocessor>,
    /// `Some` for training batches.
    pub augmenter: Option<Arc<Augmenter>>,
    /// Seed of the augmentation draws.
    pub seed: u64,
}

impl ItemBatcher {
    /// The RNG for one sample in one epoch: independent of batch composition and worker count.
    fn sample_rng(&self, epoch: u64, index: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(
            self.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03),
        )
    }

    /// Prepare item `index` of epoch `epoch` (augmented when an augmenter is set).
    pub fn prepare(&self, item: &Item, epoch: usize, index: usize) -> Prepared {
        self.prepare_keyed(item, epoch as u64, index as u64)
    }

    fn prepare_keyed(&self, item: &Item, epoch: u64, index: u64) -> Prepared {
        match &self.augmenter {
            Some(aug) => {
                let mut rng = self.sample_rng(epoch, index);
                let mut sample = item.sample.clone();
                aug.apply(&mut sample, &mut rng);
                self.preprocessor.finish(&sample, Some(&mut rng))
            }
            None => self.preprocessor.finish::<ChaCha8Rng>(&item.sample, None),
        }
    }

    /// Prepare each item with its RNG key `(epoch, index)` and stack them into one batch.
    fn stack_keyed<'a>(&self, keyed: impl Iterator<Item = (&'a Item, u64, u64)>, indices: Vec<usize>) -> HostBatch {
        let mut targets = Vec::with_capacity(indices.len());
        let (prepared, labels): (Vec<Prepared>, Vec<usize>) = keyed
            .map(|(item, epoch, index)| {
                targets.push(item.tokens.clone());
                (self.prepare_keyed(item, epoch, index), item.label)
            })
            .unzip();
        HostBatch::from_prepared(&prepared, &labels, targets, indices)
    }

    /// Batch items taken from anywhere (e.g. a Burn `Dataset`), without augmentation randomness
    /// tied to dataset positions: item `k` of the list uses position `k`.
    pub fn batch_items(&self, items: &[Item], epoch: usize) -> HostBatch {
        let keyed = items.iter().enumerate().map(|(k, it)| (it, epoch as u64, k as u64));
        self.stack_keyed(keyed, (0..items.len()).collect())
    }

    /// Batch items that arrive without dataset positions or an epoch number (Burn's `DataLoader`).
    /// Each item's augmentation draws are keyed by its path and by the paths of the whole batch:
    /// deterministic for a seed in whatever order worker threads deliver the batches, and new each
    /// epoch because the loader reshuffles (without shuffling, every epoch repeats the same draws).
    pub fn batch_unpositioned(&self, items: &[Item]) -> HostBatch {
        let path_keys: Vec<u64> =
            items.iter().map(|it| fnv1a(FNV_OFFSET, it.path.as_os_str().as_encoded_bytes())).collect();
        let batch_key = path_keys.iter().fold(FNV_OFFSET, |h, k| fnv1a(h, &k.to_le_bytes()));
        let keyed = items.iter().zip(&path_keys).map(|(it, &key)| (it, batch_key, key));
        self.stack_keyed(keyed, (0..items.len()).collect())
    }

    /// The batch of `indices` of `data` in epoch `epoch`.
    pub fn host_batch(&self, data: &SignDataset, indices: &[usize], epoch: usize) -> HostBatch {
        let keyed = indices.iter().map(|&i| (&data.items[i], epoch as u64, i as u64));
        self.stack_keyed(keyed, indices.to_vec())
    }
}

/// Burn's batcher interface: `[batch, window, features]` inputs, `[batch, window]` padding mask
/// (true = padding) and `[batch]` labels, uploaded to `device` in one transfer each.
impl<B: Backend> Batcher<B, Item, SignBatch<B>> for ItemBatcher {
    fn batch(&self, items: Vec<Item>, device: &B::Device) -> SignBatch<B> {
        self.batch_unpositioned(&items).to_device(device)
    }
}

/// Settings of one pass over a subset.
#[derive(Debug, Clone)]
pub struct LoaderConfig {
    /// Sequences per batch.
    pub batch_size: usize,
    /// Shuffle each epoch (seeded by `seed` and the epoch).
    pub shuffle: bool,
    /// Drop an incomplete last batch.
    pub drop_last: bool,
    /// Shuffle seed; the order of epoch `e` depends only on (seed, e).
    pub seed: u64,
    /// Batch-building threads.
    pub workers: usize,
    /// Batches each worker may have ready ahead of the consumer.
    pub prefetch: usize,
}

/// The batch order of one epoch: a list of index lists.
pub fn epoch_batches(indices: &[usize], cfg: &LoaderConfig, epoch: usize) -> Vec<Vec<usize>> {
    let mut order = indices.to_vec();
    if cfg.shuffle {
        let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed ^ (epoch as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D));
        order.shuffle(&mut rng);
    }
    let bs = cfg.batch_size.max(1);
    let mut batches: Vec<Vec<usize>> = order.chunks(bs).map(|c| c.to_vec()).collect();
    if cfg.drop_last && batches.last().is_some_and(|b| b.len() < bs) && batches.len() > 1 {
        batches.pop();
    }
    batches
}

/// An iterator over the host batches of one epoch, built ahead by worker threads. Batch `b` is
/// built by worker `b % workers` and the consumer takes them in order, so results do not depend
/// on the worker count. Dropping it stops the workers.
#[derive(Debug)]
pub struct EpochLoader {
    receivers: Vec<Receiver<HostBatch>>,
    handles: Vec<JoinHandle<()>>,
    next: usize,
    total: usize,
}

impl EpochLoader {
    /// Start loading `epoch` of `indices`, beginning at batch `start_batch` (for resuming).
    pub fn start(
        data: Arc<SignDataset>,
        batcher: ItemBatcher,
        indices: &[usize],
        cfg: &LoaderConfig,
        epoch: usize,
        start_batch: usize,
    ) -> Self {
        let batches = Arc::new(epoch_batches(indices, cfg, epoch));
        let total = batches.len();
        let workers = cfg.workers.max(1);
        let mut receivers = Vec::with_capacity(workers);
        let mut handles = Vec::with_capacity(workers);
        for w in 0..workers {
            let (tx, rx) = sync_channel::<HostBatch>(cfg.prefetch.max(1));
            let (data, batcher, batches) = (data.clone(), batcher.clone(), batches.clone());
            let handle = std::thread::Builder::new()
                .name(format!("loader-{w}"))
                .spawn(move || {
                    let mut b = start_batch + (w + workers - start_batch % workers) % workers;
                    while b < batches.len() {
                        let hb = batcher.host_batch(&data, &batches[b], epoch);
                        if tx.send(hb).is_err() {
                            break;
                        }
                        b += workers;
                    }
                })
                .expect("spawn loader thread");
            receivers.push(rx);
            handles.push(handle);
        }
        Self { receivers, handles, next: start_batch, total }
    }

    /// Batches in this epoch (including any skipped at the start).
    pub fn len(&self) -> usize {
        self.total
    }

    /// Whether no batch is left.
    pub fn is_empty(&self) -> bool {
        self.total == 0
    }
}

impl Iterator for EpochLoader {
    type Item = HostBatch;

    fn next(&mut self) -> Option<HostBatch> {
        if self.next >= self.total {
            return None;
        }
        let w = self.next % self.receivers.len();
        self.next += 1;
        self.receivers[w].recv().ok()
    }
}

impl Drop for EpochLoader {
    fn drop(&mut self) {
        self.receivers.clear();
        for h in self.handles.drain(..) {
            let _ = h.join();
        }
    }
}

/// Device-side prefetch: uploads the batches of an [`EpochLoader`] to `device` on a background
/// thread, one batch ahead, so the copy of batch n+1 is issued while the training step computes
/// on batch n (GPU backends run asynchronously, so the two overlap). For host-resident backends
/// it would only add a thread; the trainer uses it on GPUs.
#[derive(Debug)]
pub struct DevicePrefetcher<B: Backend> {
    rx: Option<Receiver<SignBatch<B>>>,
    handle: Option<JoinHandle<()>>,
}

impl<B: Backend> DevicePrefetcher<B> {
    /// Start uploading `loader`'s batches to `device`.
    pub fn start(loader: EpochLoader, device: B::Device) -> Self {
        let (tx, rx) = sync_channel::<SignBatch<B>>(1);
        let handle = std::thread::Builder::new()
            .name("device-prefetch".into())
            .spawn(move || {
                for hb in loader {
                    if tx.send(hb.to_device::<B>(&device)).is_err() {
                        break;
                    }
                }
            })
            .ok();
        Self { rx: Some(rx), handle }
    }
}

impl<B: Backend> Iterator for DevicePrefetcher<B> {
    type Item = SignBatch<B>;

    fn next(&mut self) -> Option<SignBatch<B>> {
        self.rx.as_ref()?.recv().ok()
    }
}

impl<B: Backend> Drop for DevicePrefetcher<B> {
    fn drop(&mut self) {
        // Closing the channel ends the thread at its next send; it drops the loader's workers.
        self.rx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
