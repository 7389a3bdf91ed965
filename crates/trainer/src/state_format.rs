//! The loop state's on-disk form: [`TrainState`] and the records it holds are written and read
//! only as `bundle::state_v1` documents. Every conversion destructures both sides whole, so a
//! field added to a loop type fails to compile here until it has a place in the format.

use bundle::state_v1::{
    BestV1, DeviceFaultV1, EpochV1, FaultKindV1, ScalerV1, SequenceScoresV1, SignatureV1, StateV1, SumsV1,
};

use crate::amp::LossScaler;
use crate::checkpoint::{BestRecord, EpochRecord, ModelSignature, RunningSums, TrainState};
use crate::fault::{DeviceFault, FaultKind};
use crate::validate::SequenceScores;

impl From<TrainState> for StateV1 {
    fn from(s: TrainState) -> Self {
        let TrainState {
            format,
            step,
            epoch,
            batch_in_epoch,
            samples,
            best,
            epochs_since_best,
            history,
            elapsed_s,
            skipped_steps,
            lr_scale,
            rollbacks,
            consecutive_bad,
            scaler,
            signature,
            micro_batch,
            device_faults,
            epoch_sums,
            window_sums,
        } = s;
        Self {
            format,
            step,
            epoch,
            batch_in_epoch,
            samples,
            best: best.map(best_v1),
            epochs_since_best,
            history: history.into_iter().map(epoch_v1).collect(),
            elapsed_s,
            skipped_steps,
            lr_scale,
            rollbacks,
            consecutive_bad,
            scaler: scaler_v1(scaler),
            signature: signature_v1(signature),
            micro_batch,
            device_faults: device_faults.into_iter().map(fault_v1).collect(),
            epoch_sums: sums_v1(epoch_sums),
            window_sums: sums_v1(window_sums),
        }
    }
}

impl From<StateV1> for TrainState {
    fn from(s: StateV1) -> Self {
        let StateV1 {
            format,
            step,
            epoch,
            batch_in_epoch,
            samples,
            best,
            epochs_since_best,
            history,
            elapsed_s,
            skipped_steps,
            lr_scale,
            rollbacks,
            consecutive_bad,
            scaler,
            signature,
            micro_batch,
            device_faults,
            epoch_sums,
            window_sums,
        } = s;
        Self {
            format,
            step,
            epoch,
            batch_in_epoch,
            samples,
            best: best.map(best_of),
            epochs_since_best,
            history: history.into_iter().map(epoch_of).collect(),
            elapsed_s,
            skipped_steps,
            lr_scale,
            rollbacks,
            consecutive_bad,
            scaler: scaler_of(scaler),
            signature: signature_of(signature),
            micro_batch,
            device_faults: device_faults.into_iter().map(fault_of).collect(),
            epoch_sums: sums_of(epoch_sums),
            window_sums: sums_of(window_sums),
        }
    }
}

fn epoch_v1(e: EpochRecord) -> EpochV1 {
    let EpochRecord {
        epoch,
        step,
        train_loss,
        train_top1,
        valid_loss,
        valid_top1,
        valid_top5,
        valid_sequences,
        lr,
        samples_per_s,
        elapsed_s,
        peak_mem_in_use_mib,
        peak_mem_reserved_mib,
    } = e;
    EpochV1 {
        epoch,
        step,
        train_loss,
        train_top1,
        valid_loss,
        valid_top1,
        valid_top5,
        valid_sequences: valid_sequences.map(|SequenceScores { greedy, beam, decoder }| SequenceScoresV1 {
            greedy: greedy.into(),
            beam: beam.into(),
            decoder: decoder.into(),
        }),
        lr,
        samples_per_s,
        elapsed_s,
        peak_mem_in_use_mib,
        peak_mem_reserved_mib,
    }
}

fn epoch_of(e: EpochV1) -> EpochRecord {
    let EpochV1 {
        epoch,
        step,
        train_loss,
        train_top1,
        valid_loss,
        valid_top1,
        valid_top5,
        valid_sequences,
        lr,
        samples_per_s,
        elapsed_s,
        peak_mem_in_use_mib,
        peak_mem_reserved_mib,
    } = e;
    EpochRecord {
        epoch,
        step,
        train_loss,
        train_top1,
        valid_loss,
        valid_top1,
        valid_top5,
        valid_sequences: valid_sequences.map(|SequenceScoresV1 { greedy, beam, decoder }| SequenceScores {
            greedy: greedy.into(),
            beam: beam.into(),
            decoder: decoder.into(),
        }),
        lr,
        samples_per_s,
        elapsed_s,
        peak_mem_in_use_mib,
        peak_mem_reserved_mib,
    }
}

fn best_v1(b: BestRecord) -> BestV1 {
    let BestRecord { epoch, step, metric, value } = b;
    BestV1 { epoch, step, metric, value }
}

fn best_of(b: BestV1) -> BestRecord {
    let BestV1 { epoch, step, metric, value } = b;
    BestRecord { epoch, step, metric, value }
}

fn scaler_v1(s: LossScaler) -> ScalerV1 {
    let LossScaler { enabled, scale, good_steps, backoffs, growths } = s;
    ScalerV1 { enabled, scale, good_steps, backoffs, growths }
}

fn scaler_of(s: ScalerV1) -> LossScaler {
    let ScalerV1 { enabled, scale, good_steps, backoffs, growths } = s;
    LossScaler { enabled, scale, good_steps, backoffs, growths }
}

fn signature_v1(s: ModelSignature) -> SignatureV1 {
    let ModelSignature { kind, input_features, classes, trainable_params, config } = s;
    SignatureV1 { kind, input_features, classes, trainable_params, config }
}

fn signature_of(s: SignatureV1) -> ModelSignature {
    let SignatureV1 { kind, input_features, classes, trainable_params, config } = s;
    ModelSignature { kind, input_features, classes, trainable_params, config }
}

fn fault_v1(f: DeviceFault) -> DeviceFaultV1 {
    let DeviceFault { step, epoch, kind, message, micro_batch, accumulation_steps, resumed_from_step } = f;
    let kind = match kind {
        FaultKind::OutOfMemory => FaultKindV1::OutOfMemory,
        FaultKind::Device => FaultKindV1::Device,
    };
    DeviceFaultV1 { step, epoch, kind, message, micro_batch, accumulation_steps, resumed_from_step }
}

fn fault_of(f: DeviceFaultV1) -> DeviceFault {
    let DeviceFaultV1 { step, epoch, kind, message, micro_batch, accumulation_steps, resumed_from_step } = f;
    let kind = match kind {
        FaultKindV1::OutOfMemory => FaultKind::OutOfMemory,
        FaultKindV1::Device => FaultKind::Device,
    };
    DeviceFault { step, epoch, kind, message, micro_batch, accumulation_steps, resumed_from_step }
}

fn sums_v1(s: RunningSums) -> SumsV1 {
    let RunningSums { loss_sum_bits, steps, correct, samples } = s;
    SumsV1 { loss_sum_bits, steps, correct, samples }
}

fn sums_of(s: SumsV1) -> RunningSums {
    let SumsV1 { loss_sum_bits, steps, correct, samples } = s;
    RunningSums { loss_sum_bits, steps, correct, samples }
}
