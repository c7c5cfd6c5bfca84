//! The walk over the tensors of boxed values: `Tensor`, `Tensor[]` and `Tensor?[]`.

use switchboard_tensor::Tensor;

use crate::IValue;

// Note [Tensors of a boxed value]
// Layers that handle any operator boxed (fallbacks, capture, tracing, autocast, logging) visit
// the tensors of each argument and return: a `Tensor`, the items of a `Tensor[]`, the present
// items of a `Tensor?[]`, as the dispatcher's own key extraction does. The walk lives here
// once; it does not look into tuples or generic lists, which no schema argument of tensors
// uses.

impl IValue {
    /// The tensors this value holds, in order: itself if a `Tensor`, the items of a
    /// `Tensor[]`, the present items of a `Tensor?[]`; none for any other value (Note
    /// [Tensors of a boxed value]).
    ///
    /// ```
    /// use switchboard_dispatcher::{thin_vec, IValue};
    /// use switchboard_tensor::{ScalarType, Tensor};
    ///
    /// let t = Tensor::zeros(&[2], ScalarType::Float).unwrap();
    /// let list = IValue::OptionalTensorList(thin_vec![None, Some(t.clone())]);
    /// assert_eq!(list.tensors().count(), 1);
    /// assert_eq!(IValue::Int(3).tensors().count(), 0);
    /// ```
    pub fn tensors(&self) -> impl Iterator<Item = &Tensor> {
        let (one, list, optional): (Option<&Tensor>, &[Tensor], &[Option<Tensor>]) = match self {
            IValue::Tensor(t) => (Some(t), &[], &[]),
            IValue::TensorList(ts) => (None, ts, &[]),
            IValue::OptionalTensorList(ts) => (None, &[], ts),
            _ => (None, &[], &[]),
        };
        one.into_iter().chain(list).chain(optional.iter().flatten())
    }

    /// [`tensors`](Self::tensors), mutable: to replace each tensor in place.
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = &mut Tensor> {
        let (one, list, optional): (Option<&mut Tensor>, &mut [Tensor], &mut [Option<Tensor>]) =
            match self {
                IValue::Tensor(t) => (Some(t), &mut [], &mut []),
                IValue::TensorList(ts) => (None, ts, &mut []),
                IValue::OptionalTensorList(ts) => (None, &mut [], ts),
                _ => (None, &mut [], &mut []),
            };
        one.into_iter()
            .chain(list)
            .chain(optional.iter_mut().flatten())
    }

    /// Replaces each tensor of this value by `f` of it, stopping at the first error (which
    /// leaves the tensors before it replaced).
    pub fn try_map_tensors<E>(
        &mut self,
        mut f: impl FnMut(&Tensor) -> Result<Tensor, E>,
    ) -> Result<(), E> {
        for t in self.tensors_mut() {
            *t = f(t)?;
        }
        Ok(())
    }
}

/// The tensors of boxed values, in order ([`IValue::tensors`] of each).
pub fn stack_tensors(values: &[IValue]) -> impl Iterator<Item = &Tensor> {
    values.iter().flat_map(IValue::tensors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_tensor::ScalarType;
    use thin_vec::thin_vec;

    fn tensor(n: usize) -> Tensor {
        Tensor::zeros(&[n as i64], ScalarType::Float).unwrap()
    }

    #[test]
    fn visits_tensors_lists_and_present_optionals_in_order() {
        let values = [
            IValue::Tensor(tensor(1)),
            IValue::Int(7),
            IValue::TensorList(thin_vec![tensor(2), tensor(3)]),
            IValue::OptionalTensorList(thin_vec![None, Some(tensor(4)), None]),
            IValue::Tuple(thin_vec![IValue::Tensor(tensor(9))]),
        ];
        let sizes: Vec<i64> = stack_tensors(&values).map(|t| t.sizes()[0]).collect();
        assert_eq!(sizes, [1, 2, 3, 4]);
    }

    #[test]
    fn replaces_tensors_in_place() {
        let mut values = [
            IValue::Tensor(tensor(1)),
            IValue::TensorList(thin_vec![tensor(2)]),
            IValue::OptionalTensorList(thin_vec![None, Some(tensor(3))]),
        ];
        for v in &mut values {
            v.try_map_tensors(|t| Ok::<_, ()>(tensor(t.sizes()[0] as usize + 10)))
                .unwrap();
        }
        let sizes: Vec<i64> = stack_tensors(&values).map(|t| t.sizes()[0]).collect();
        assert_eq!(sizes, [11, 12, 13]);
        assert!(matches!(&values[2], IValue::OptionalTensorList(ts) if ts[0].is_none()));
        let mut failing = IValue::TensorList(thin_vec![tensor(1), tensor(2)]);
        assert_eq!(failing.try_map_tensors(|_| Err("no")), Err("no"));
    }
}
