pub use burn_backend::StreamId;
