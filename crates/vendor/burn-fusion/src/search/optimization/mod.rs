mod blocks;
mod stream;

#[cfg(test)]
mod tests;

pub use stream::*;
