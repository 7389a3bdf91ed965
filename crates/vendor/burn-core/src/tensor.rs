pub use burn_tensor::*;
