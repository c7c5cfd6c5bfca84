//! Objects of custom classes (`__torch__.torch.classes.<ns>.<Name>`) as boxed values: PyTorch's
//! `torch::CustomClassHolder` behind an `IValue`, and the typed-kernel glue for them.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::arg::{Arg, KernelParam};
use crate::ivalue::IValue;
use crate::ret::ReturnValue;

// Note [Custom class objects]
// PyTorch boxes an object of a `torch::class_` as an `IValue` holding an
// `intrusive_ptr<CustomClassHolder>` whose type is the class's qualified name; typed kernels
// take `const intrusive_ptr<T>&` and return `intrusive_ptr<T>`. Here a Rust type is a class
// through [`CustomClass`] (its qualified name, which is also the schema type typed kernels
// infer), typed kernels take `&Arc<T>` and return `Arc<T>`, and `IValue::Object` holds an
// `Arc<Object>`: the class's name and the `Arc<T>`, type-erased. The `IValue` payload stays
// one thin pointer, so an `IValue` stays two words (Note [Two-word IValues]); cloning the value
// shares the object, as copying an `intrusive_ptr` does. An object of another class where `T`
// is expected is a type error, as in PyTorch.

/// A Rust type registered as a custom class: its objects box as `IValue::Object` under
/// `QUALIFIED_NAME` (Note [Custom class objects]).
pub trait CustomClass: Any + Send + Sync {
    /// `__torch__.torch.classes.<ns>.<Name>`, as schemas name the class.
    const QUALIFIED_NAME: &'static str;
}

/// An object of a custom class (Note [Custom class objects]).
pub struct Object {
    qualified_name: &'static str,
    /// The `Arc<T>` of the class's type `T`.
    value: Box<dyn Any + Send + Sync>,
}

impl Object {
    /// Boxes `value` as an object of its class.
    pub fn new<T: CustomClass>(value: Arc<T>) -> Arc<Object> {
        Arc::new(Object {
            qualified_name: T::QUALIFIED_NAME,
            value: Box::new(value),
        })
    }

    /// The class's qualified name (`__torch__.torch.classes.c10d.Work`).
    pub fn qualified_name(&self) -> &'static str {
        self.qualified_name
    }

    /// The value, if the object is of class `T`.
    pub fn downcast<T: CustomClass>(&self) -> Option<&Arc<T>> {
        self.value.downcast_ref()
    }
}

impl fmt::Debug for Object {
    /// As Python prints a script object: `<__torch__.torch.classes.c10d.Work object>`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<{} object>", self.qualified_name)
    }
}

impl<T: CustomClass> Arg for Arc<T> {
    type Ref<'a> = &'a Arc<T>;
    const SCHEMA_TYPE: &'static str = T::QUALIFIED_NAME;
    fn from_ivalue(v: &IValue) -> Option<&Arc<T>> {
        match v {
            IValue::Object(o) => o.downcast(),
            _ => None,
        }
    }
    fn to_ivalue(r: &Arc<T>) -> IValue {
        IValue::Object(Object::new(Arc::clone(r)))
    }
}

impl<T: CustomClass> KernelParam for &Arc<T> {
    type Family = Arc<T>;
    type Param<'a> = &'a Arc<T>;
    #[inline(always)]
    fn param<'a>(r: <Arc<T> as Arg>::Ref<'a>) -> <Arc<T> as Arg>::Ref<'a> {
        r
    }
}

impl<T: CustomClass> ReturnValue for Arc<T> {
    const SCHEMA_TYPE: &'static str = T::QUALIFIED_NAME;
    fn into_ivalue(self) -> IValue {
        IValue::Object(Object::new(self))
    }
    fn from_ivalue(v: IValue) -> Option<Arc<T>> {
        match v {
            IValue::Object(o) => o.downcast().cloned(),
            _ => None,
        }
    }
}
