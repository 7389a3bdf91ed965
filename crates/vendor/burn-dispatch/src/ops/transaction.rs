use alloc::vec::Vec;
use burn_backend::{
    ExecutionError,
    ops::{TransactionOps, TransactionPrimitive, TransactionPrimitiveData},
};

use crate::Dispatch;
use crate::backends::*;

impl TransactionOps<Self> for Dispatch {
    // SignFlow patch: the read runs before the future is returned (crates/vendor/README.md).
    fn tr_execute(
        transaction: TransactionPrimitive<Self>,
    ) -> impl Future<Output = Result<TransactionPrimitiveData, ExecutionError>> + Send {
        core::future::ready(execute(transaction))
    }
}

/// SignFlow patch: `tr_execute`'s reads, compiled in this crate only.
fn execute(transaction: TransactionPrimitive<Dispatch>) -> Result<TransactionPrimitiveData, ExecutionError> {
    crate::counters::count_read();
    crate::read::now(async move {
        let first_tensor = transaction
            .read_floats
            .first()
            .or(transaction.read_ints.first())
            .or(transaction.read_bools.first());

        match first_tensor {
            Some(tensor) => {
                transaction_op!(transaction, tensor)
            }
            None => Ok(TransactionPrimitiveData::default()),
        }
    })
}
