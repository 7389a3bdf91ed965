mod activation;
mod bool_tensor;
#[cfg(feature = "distributed")]
mod distributed;
mod int_tensor;
mod module;
mod qtensor;
mod tensor;
mod transaction;
