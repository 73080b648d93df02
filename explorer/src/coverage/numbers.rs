//! The space's argument classes of numbers: for each number the workload draws into a call
//! argument ([`Number`]), which boundary class ([`Class`]) its values fell in. Every
//! (number, class) pair is a cell; [`NUMBERS_EXCLUDED`] declares those the explorer cannot
//! reach, with the reason.

use lockstep::kernel::MAX_WORKGROUP_INVOCATIONS;

use crate::boundary::Class;
use crate::view::{MAX_VIEW_DIM, MAX_VIEW_STRIDE};
use crate::workload::{
    MAX_ELEMS, MAX_LEN, MAX_TENSOR_DIM, MAX_TENSORS, MAX_WORKGROUPS, MAX_WRITE_ELEMS,
};

/// A number argument of a call, as the driver passes it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Number {
    /// `create`'s length, in elements.
    CreateLen,
    /// `empty`'s length, in elements (its bytes over 4).
    EmptyLen,
    /// The length of a peer's buffer that `to_client` copies into the explored device.
    ToClientLen,
    /// `write_at`'s offset, in elements, where the driver passes it as drawn.
    WriteOffset,
    /// `write_at`'s length, in elements, where the driver passes it as drawn.
    WriteLen,
    /// How many tensors one `create_tensors` packs.
    TensorCount,
    /// A tensor's rank.
    TensorRank,
    /// A tensor's dimension.
    TensorDim,
    /// How far past its binding's end the overrun kernel stores, in elements.
    OverrunPastEnd,
    /// How far below 2^64 (or 2^63, for tensors) an oversized request is, in bytes.
    OversizedBelow,
    /// The length of a misaligned `write_at`, in bytes.
    MisalignedLen,
    /// Each axis of a launch's static workgroup count.
    LaunchWorkgroups,
    /// Each axis of a launch's dynamic workgroup count.
    DynamicWorkgroups,
    /// The device memory budget a world sets, in bytes.
    BudgetBytes,
    /// A pool's cap in a world's pool list, in bytes.
    PoolCapBytes,
    /// The invocations of a kernel's workgroup (its size's product, saturating): each
    /// formula's, and the size building the first must be refused for.
    WorkgroupSize,
    /// A dimension of a strided view a tensor read is given.
    ViewDim,
    /// A stride of a strided view a tensor read is given, in elements.
    ViewStride,
}

impl Number {
    /// Every number, in the order reports print them.
    pub const ALL: [Number; 18] = [
        Number::CreateLen,
        Number::EmptyLen,
        Number::ToClientLen,
        Number::WriteOffset,
        Number::WriteLen,
        Number::TensorCount,
        Number::TensorRank,
        Number::TensorDim,
        Number::OverrunPastEnd,
        Number::OversizedBelow,
        Number::MisalignedLen,
        Number::LaunchWorkgroups,
        Number::DynamicWorkgroups,
        Number::BudgetBytes,
        Number::PoolCapBytes,
        Number::WorkgroupSize,
        Number::ViewDim,
        Number::ViewStride,
    ];

    /// The number's name, as coverage reports print it.
    pub fn name(self) -> &'static str {
        match self {
            Number::CreateLen => "create len",
            Number::EmptyLen => "empty len",
            Number::ToClientLen => "to_client len",
            Number::WriteOffset => "write_at offset",
            Number::WriteLen => "write_at len",
            Number::TensorCount => "create_tensors count",
            Number::TensorRank => "create_tensors rank",
            Number::TensorDim => "create_tensors dim",
            Number::OverrunPastEnd => "overrun past_end",
            Number::OversizedBelow => "oversized below",
            Number::MisalignedLen => "misaligned len",
            Number::LaunchWorkgroups => "launch workgroups",
            Number::DynamicWorkgroups => "dynamic workgroups",
            Number::BudgetBytes => "budget bytes",
            Number::PoolCapBytes => "pool cap bytes",
            Number::WorkgroupSize => "workgroup size",
            Number::ViewDim => "view dim",
            Number::ViewStride => "view stride",
        }
    }

    /// The largest value of the number's range: its values above are [`Class::Overflow`].
    pub fn max(self) -> u64 {
        match self {
            Number::CreateLen | Number::EmptyLen | Number::ToClientLen => MAX_LEN as u64,
            Number::WriteOffset => MAX_ELEMS as u64,
            Number::WriteLen => MAX_WRITE_ELEMS as u64,
            Number::TensorCount => MAX_TENSORS as u64,
            Number::TensorRank => 3,
            Number::TensorDim => MAX_TENSOR_DIM as u64,
            Number::OverrunPastEnd => 7,
            Number::OversizedBelow => 511,
            Number::MisalignedLen => 8,
            Number::LaunchWorkgroups | Number::DynamicWorkgroups => MAX_WORKGROUPS.into(),
            Number::BudgetBytes | Number::PoolCapBytes => u64::MAX,
            Number::WorkgroupSize => MAX_WORKGROUP_INVOCATIONS,
            Number::ViewDim => MAX_VIEW_DIM as u64,
            Number::ViewStride => MAX_VIEW_STRIDE as u64,
        }
    }

    /// The class of `value` as this number.
    pub fn class(self, value: u64) -> Class {
        Class::of(value, self.max())
    }
}

/// A declaration that the cells of `numbers` × `classes` cannot be reached.
pub struct NumberExclusion {
    /// Numbers matched.
    pub numbers: &'static [Number],
    /// Classes matched.
    pub classes: &'static [Class],
    /// Why those cells cannot be reached.
    pub reason: &'static str,
}

/// The (number, class) cells the explorer cannot reach. The first that matches gives the
/// reason.
pub const NUMBERS_EXCLUDED: &[NumberExclusion] = &[
    NumberExclusion {
        numbers: &[Number::CreateLen, Number::ToClientLen, Number::WriteLen],
        classes: &[Class::Overflow],
        reason: "the length is the host data's: data past the device's largest allocation (8 MiB at least) would cost the model its size; empty's length and tensor shapes reach the sizes no device serves",
    },
    NumberExclusion {
        numbers: &[Number::TensorCount, Number::TensorRank],
        classes: &[
            Class::BelowPow2,
            Class::AbovePow2,
            Class::Ordinary,
            Class::Overflow,
        ],
        reason: "0 to 3 tensors of rank 0 to 3: zero, one, two (2^k) and three (max) are every value; a count or rank has no sum or product to overflow",
    },
    NumberExclusion {
        numbers: &[Number::OverrunPastEnd],
        classes: &[Class::Overflow],
        reason: "the overrun kernel's index is the binding's length plus past_end in u32: a sum that wraps lands inside the binding, a store in range rather than an overrun",
    },
    NumberExclusion {
        numbers: &[Number::OversizedBelow, Number::MisalignedLen],
        classes: &[Class::Overflow],
        reason: "already the distance below 2^64 of a request that overflows (oversized), or bounded by the misaligned write's few bytes",
    },
    NumberExclusion {
        numbers: &[Number::BudgetBytes, Number::PoolCapBytes],
        classes: &[Class::Overflow],
        reason: "a budget or a pool's cap is any u64 of bytes: none is past its type's range",
    },
    NumberExclusion {
        numbers: &[Number::MisalignedLen],
        classes: &[Class::Zero],
        reason: "a misaligned write has bytes to write (an empty write is EmptyWrite's)",
    },
];

/// The cells of numbers: every (number, class) pair, with its declaration.
pub fn cells() -> Vec<(Number, Class, Option<&'static str>)> {
    Number::ALL
        .iter()
        .flat_map(|&number| {
            Class::ALL.iter().map(move |&class| {
                let excluded = NUMBERS_EXCLUDED
                    .iter()
                    .find(|e| e.numbers.contains(&number) && e.classes.contains(&class))
                    .map(|e| e.reason);
                (number, class, excluded)
            })
        })
        .collect()
}

/// The index of (`number`, `class`) in [`cells`].
pub fn index(number: Number, class: Class) -> usize {
    number as usize * Class::ALL.len() + class as usize
}
