mod base;
mod constant;
mod id;
mod primitive;
mod running;
mod sync_once_cell;
mod tensor;
mod visitor;

pub use base::*;
pub use constant::*;
pub use id::*;
pub use running::*;
pub use visitor::*;
