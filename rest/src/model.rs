//! One description per object, from which both its schema ([`Model::schema`]) and its JSON
//! ([`Model::emit`]) come: each property is a name, a [`Schema`] and a getter from the source
//! value. A getter answering `None` leaves an optional key out; a required key's getter always
//! answers. The tests validate what `emit` writes against what `schema` says, so a field whose
//! getter and schema disagree fails there, not in a client.

use crate::schema::{Field, Schema};
use serde_json::{Map, Value};

type Getter<T, C> = Box<dyn Fn(&T, &C) -> Option<Value> + Send + Sync>;

/// An object's properties, in order, with their getters from a `T` (and a context `C`
/// shared by every object of one answer: the cluster's name, the time).
pub struct Model<T, C = ()> {
    fields: Vec<(Field, Getter<T, C>)>,
}

impl<T, C> Default for Model<T, C> {
    fn default() -> Self {
        Model { fields: Vec::new() }
    }
}

impl<T, C> std::fmt::Debug for Model<T, C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.fields.iter().map(|(fl, _)| fl.name))
            .finish()
    }
}

impl<T, C> Model<T, C> {
    /// No properties yet.
    pub fn new() -> Self {
        Model::default()
    }

    /// An optional property: `get` answers `None` to leave it out.
    pub fn opt(
        mut self,
        name: &'static str,
        schema: Schema,
        get: impl Fn(&T, &C) -> Option<Value> + Send + Sync + 'static,
    ) -> Self {
        self.fields.push((crate::schema::opt(name, schema), Box::new(get)));
        self
    }

    /// A required property.
    pub fn req(
        mut self,
        name: &'static str,
        schema: Schema,
        get: impl Fn(&T, &C) -> Value + Send + Sync + 'static,
    ) -> Self {
        self.fields
            .push((crate::schema::req(name, schema), Box::new(move |t, c| Some(get(t, c)))));
        self
    }

    /// The object's schema (closed: only these keys).
    pub fn schema(&self) -> Schema {
        Schema::Object(self.fields.iter().map(|(f, _)| f.clone()).collect())
    }

    /// `t` as JSON: every property whose getter answers, in the description's order.
    pub fn emit(&self, t: &T, c: &C) -> Value {
        let mut m = Map::new();
        for (f, get) in &self.fields {
            if let Some(v) = get(t, c) {
                m.insert(f.name.to_string(), v);
            }
        }
        Value::Object(m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Components, IntFormat};
    use serde_json::json;

    #[test]
    fn schema_and_json_come_from_one_description() {
        let m: Model<(u32, Option<String>)> = Model::new()
            .req("id", Schema::Int(IntFormat::I32), |t: &(u32, Option<String>), _| json!(t.0))
            .opt("name", Schema::Str, |t, _| t.1.as_ref().map(|s| json!(s)));
        let c = Components::default();
        let a = m.emit(&(3, None), &());
        assert_eq!(a, json!({"id": 3}));
        c.validate(&a, &m.schema()).unwrap();
        let b = m.emit(&(4, Some("x".into())), &());
        assert_eq!(b, json!({"id": 4, "name": "x"}));
        c.validate(&b, &m.schema()).unwrap();
    }
}
