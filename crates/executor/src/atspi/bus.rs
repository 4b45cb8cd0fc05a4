//! The AT-SPI calls the accessibility executor and the drafter make, on the accessibility bus
//! the session bus names. Made with the gateway's own zbus (the `atspi` crates pin zbus to
//! another async runtime).

use aai_descriptor::{AaiError, ErrorKind};
use serde_json::{Value, json};
use zbus::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

/// AT-SPI's table interface (rows and columns of a table or tree view).
const TABLE: &str = "org.a11y.atspi.Table";
const ACCESSIBLE: &str = "org.a11y.atspi.Accessible";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";
const REGISTRY: &str = "org.a11y.atspi.Registry";
const ROOT: &str = "/org/a11y/atspi/accessible/root";
/// How long one AT-SPI call may wait for its answer.
const CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// One element of some application's tree: the bus name that serves it and its object path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    pub dest: String,
    pub path: OwnedObjectPath,
}

/// A connection to the accessibility bus.
#[derive(Clone)]
pub struct A11yBus {
    conn: Connection,
}

/// The state names of AT-SPI's `AtspiStateType`, by bit.
const STATES: &[&str] = &[
    "invalid",
    "active",
    "armed",
    "busy",
    "checked",
    "collapsed",
    "defunct",
    "editable",
    "enabled",
    "expandable",
    "expanded",
    "focusable",
    "focused",
    "has_tooltip",
    "horizontal",
    "iconified",
    "modal",
    "multi_line",
    "multiselectable",
    "opaque",
    "pressed",
    "resizable",
    "selectable",
    "selected",
    "sensitive",
    "showing",
    "single_line",
    "stale",
    "transient",
    "vertical",
    "visible",
    "manages_descendants",
    "indeterminate",
    "required",
    "truncated",
    "animated",
    "invalid_entry",
    "supports_autocompletion",
    "selectable_text",
    "is_default",
    "visited",
    "checkable",
    "has_popup",
    "read_only",
];

fn failed(what: impl std::fmt::Display) -> AaiError {
    AaiError::new(ErrorKind::AutomationFailed, what.to_string())
}

impl A11yBus {
    /// Connects to the accessibility bus that the session bus at `session_bus` (the
    /// environment's when `None`) names.
    ///
    /// # Errors
    /// `AUTOMATION_NOT_SUPPORTED` when there is no session bus or no accessibility bus.
    pub async fn connect(session_bus: Option<&str>) -> Result<Self, AaiError> {
        let unsupported = |what: String| AaiError::new(ErrorKind::AutomationNotSupported, what);
        let session = match session_bus {
            Some(address) => match zbus::connection::Builder::address(address) {
                Ok(builder) => builder.build().await,
                Err(e) => Err(e),
            },
            None => Connection::session().await,
        }
        .map_err(|e| {
            unsupported(format!(
                "no D-Bus session bus for the accessibility tree: {e}"
            ))
        })?;
        let reply = session
            .call_method(
                Some("org.a11y.Bus"),
                "/org/a11y/bus",
                Some("org.a11y.Bus"),
                "GetAddress",
                &(),
            )
            .await
            .map_err(|e| {
                unsupported(format!(
                    "the accessibility bus (at-spi2-core) is not running: {e}. Start the desktop's accessibility support (at-spi-bus-launcher), then call again"
                ))
            })?;
        let address: String = reply.body().deserialize().map_err(failed)?;
        let conn = zbus::connection::Builder::address(address.as_str())
            .map_err(|e| failed(format!("accessibility bus address {address:?}: {e}")))?
            .build()
            .await
            .map_err(|e| failed(format!("cannot reach the accessibility bus: {e}")))?;
        Ok(Self { conn })
    }

    async fn call<R>(
        &self,
        node: &Node,
        interface: &str,
        method: &str,
        args: &(impl serde::Serialize + zbus::zvariant::DynamicType),
    ) -> Result<R, zbus::Error>
    where
        R: for<'d> zbus::zvariant::DynamicDeserialize<'d>,
    {
        // An application that does not answer (busy, or stuck in a modal loop) costs one
        // bounded wait per call, not the whole draft or call.
        let call = self.conn.call_method(
            Some(node.dest.as_str()),
            node.path.as_str(),
            Some(interface),
            method,
            args,
        );
        let reply = tokio::time::timeout(CALL_TIMEOUT, call)
            .await
            .map_err(|_| {
                zbus::Error::Failure(format!(
                    "{method} got no answer within {} s",
                    CALL_TIMEOUT.as_secs()
                ))
            })??;
        reply.body().deserialize::<R>()
    }

    async fn get(&self, node: &Node, interface: &str, name: &str) -> Option<OwnedValue> {
        self.call(node, PROPERTIES, "Get", &(interface, name))
            .await
            .ok()
    }

    /// The applications the registry lists, with their names and process ids.
    ///
    /// # Errors
    /// The registry does not answer.
    pub async fn applications(&self) -> Result<Vec<(Node, String, Option<u32>)>, AaiError> {
        let root = Node {
            dest: REGISTRY.to_owned(),
            path: OwnedObjectPath::try_from(ROOT).map_err(failed)?,
        };
        let apps = self
            .children(&root)
            .await
            .map_err(|e| failed(format!("the accessibility registry does not answer: {e}")))?;
        let mut out = Vec::with_capacity(apps.len());
        for app in apps {
            let name = self.name(&app).await;
            let pid = self.pid(&app.dest).await;
            out.push((app, name, pid));
        }
        Ok(out)
    }

    /// The process id behind a bus name on the accessibility bus.
    pub async fn pid(&self, dest: &str) -> Option<u32> {
        let args = (dest,);
        let call = self.conn.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetConnectionUnixProcessID",
            &args,
        );
        let reply = tokio::time::timeout(CALL_TIMEOUT, call).await.ok()?.ok()?;
        reply.body().deserialize::<u32>().ok()
    }

    /// Its children, in order.
    ///
    /// # Errors
    /// The element is gone or does not answer.
    pub async fn children(&self, node: &Node) -> Result<Vec<Node>, zbus::Error> {
        let children: Vec<(String, OwnedObjectPath)> =
            self.call(node, ACCESSIBLE, "GetChildren", &()).await?;
        Ok(children
            .into_iter()
            .map(|(dest, path)| Node { dest, path })
            // AT-SPI's null reference: no element.
            .filter(|n| n.path.as_str() != "/org/a11y/atspi/null")
            .collect())
    }

    /// Its accessible name ("" when it has none or is gone).
    pub async fn name(&self, node: &Node) -> String {
        self.get(node, ACCESSIBLE, "Name")
            .await
            .and_then(|v| String::try_from(v).ok())
            .unwrap_or_default()
    }

    /// Its role's name (`push button`, `menu item`, …; "" when it is gone).
    pub async fn role(&self, node: &Node) -> String {
        self.call(node, ACCESSIBLE, "GetRoleName", &())
            .await
            .unwrap_or_default()
    }

    /// Its states by name (`enabled`, `showing`, `checked`, …).
    pub async fn states(&self, node: &Node) -> Vec<&'static str> {
        let bits: Vec<u32> = self
            .call(node, ACCESSIBLE, "GetState", &())
            .await
            .unwrap_or_default();
        let mut names = Vec::new();
        for (word, bits) in bits.iter().enumerate() {
            for bit in 0..32 {
                if bits & (1 << bit) != 0
                    && let Some(name) = STATES.get(word * 32 + bit)
                {
                    names.push(*name);
                }
            }
        }
        names
    }

    /// The AT-SPI interfaces it implements (`Action`, `Text`, `EditableText`, `Value`, …).
    pub async fn interfaces(&self, node: &Node) -> Vec<String> {
        let names: Vec<String> = self
            .call(node, ACCESSIBLE, "GetInterfaces", &())
            .await
            .unwrap_or_default();
        names
            .into_iter()
            .map(|n| n.trim_start_matches("org.a11y.atspi.").to_owned())
            .collect()
    }

    /// The names of its actions (`click`, `activate`, `press`, …).
    pub async fn actions(&self, node: &Node) -> Vec<String> {
        let actions: Vec<(String, String, String)> = self
            .call(node, "org.a11y.atspi.Action", "GetActions", &())
            .await
            .unwrap_or_default();
        actions.into_iter().map(|(name, _, _)| name).collect()
    }

    /// Does action number `index`.
    ///
    /// # Errors
    /// The element refused or is gone.
    pub async fn do_action(&self, node: &Node, index: usize) -> Result<bool, zbus::Error> {
        let index = i32::try_from(index).unwrap_or(i32::MAX);
        self.call(node, "org.a11y.atspi.Action", "DoAction", &(index,))
            .await
    }

    /// Its whole text, when it has the Text interface.
    pub async fn text(&self, node: &Node) -> Option<String> {
        let count = self
            .get(node, "org.a11y.atspi.Text", "CharacterCount")
            .await
            .and_then(|v| i32::try_from(v).ok())?;
        self.call(node, "org.a11y.atspi.Text", "GetText", &(0i32, count))
            .await
            .ok()
    }

    /// Replaces its text.
    ///
    /// # Errors
    /// It has no editable text, or is gone.
    pub async fn set_text(&self, node: &Node, text: &str) -> Result<bool, zbus::Error> {
        self.call(
            node,
            "org.a11y.atspi.EditableText",
            "SetTextContents",
            &(text,),
        )
        .await
    }

    /// Its current value, with its bounds, when it has the Value interface.
    pub async fn value(&self, node: &Node) -> Option<Value> {
        let read = |name: &'static str| async move {
            self.get(node, "org.a11y.atspi.Value", name)
                .await
                .and_then(|v| f64::try_from(v).ok())
        };
        let current = read("CurrentValue").await?;
        Some(json!({
            "value": current,
            "min": read("MinimumValue").await,
            "max": read("MaximumValue").await,
        }))
    }

    /// Sets its value.
    ///
    /// # Errors
    /// It has no settable value, or is gone.
    pub async fn set_value(&self, node: &Node, value: f64) -> Result<(), zbus::Error> {
        let value = zbus::zvariant::Value::from(value);
        self.call::<()>(
            node,
            PROPERTIES,
            "Set",
            &("org.a11y.atspi.Value", "CurrentValue", value),
        )
        .await
    }

    /// Its parent and its place among the parent's children.
    pub async fn parent(&self, node: &Node) -> Option<(Node, i32)> {
        let parent: (String, OwnedObjectPath) = self
            .get(node, ACCESSIBLE, "Parent")
            .await
            .and_then(|v| <(String, OwnedObjectPath)>::try_from(v).ok())?;
        let index: i32 = self
            .call(node, ACCESSIBLE, "GetIndexInParent", &())
            .await
            .ok()?;
        Some((
            Node {
                dest: parent.0,
                path: parent.1,
            },
            index,
        ))
    }

    /// Selects child number `index` of `parent`.
    ///
    /// # Errors
    /// The parent has no selection, or is gone.
    pub async fn select_child(&self, parent: &Node, index: i32) -> Result<bool, zbus::Error> {
        self.call(parent, "org.a11y.atspi.Selection", "SelectChild", &(index,))
            .await
    }

    /// The row and column of `table` that its child number `index` sits in.
    ///
    /// # Errors
    /// It has no Table interface, or is gone.
    pub async fn table_place(&self, table: &Node, index: i32) -> Result<(i32, i32), zbus::Error> {
        let row: i32 = self.call(table, TABLE, "GetRowAtIndex", &(index,)).await?;
        let column: i32 = self
            .call(table, TABLE, "GetColumnAtIndex", &(index,))
            .await?;
        Ok((row, column))
    }

    /// How many rows `table` has (0 when it does not say).
    pub async fn table_rows(&self, table: &Node) -> i32 {
        self.get(table, TABLE, "NRows")
            .await
            .and_then(|v| i32::try_from(v).ok())
            .unwrap_or(0)
    }

    /// The cell of `table` at `row` and `column`.
    ///
    /// # Errors
    /// It has no Table interface, or is gone.
    pub async fn table_cell(
        &self,
        table: &Node,
        row: i32,
        column: i32,
    ) -> Result<Node, zbus::Error> {
        let (dest, path): (String, OwnedObjectPath) = self
            .call(table, TABLE, "GetAccessibleAt", &(row, column))
            .await?;
        Ok(Node { dest, path })
    }

    /// Makes `row` of `table` the selection, as a click on it would (a table's rows are
    /// selected through its Table interface: GTK's tree views refuse `SelectChild`), and says
    /// whether it is the one row selected now. Rows selected before are let go first: in a
    /// list that takes several, they would be acted on too (a file dialog opens every file
    /// selected).
    ///
    /// # Errors
    /// It has no Table interface, or is gone.
    pub async fn select_row(&self, table: &Node, row: i32) -> Result<bool, zbus::Error> {
        let before: Vec<i32> = self.call(table, TABLE, "GetSelectedRows", &()).await?;
        for other in before.into_iter().filter(|r| *r != row) {
            let _: bool = self
                .call(table, TABLE, "RemoveRowSelection", &(other,))
                .await?;
        }
        let _: bool = self.call(table, TABLE, "AddRowSelection", &(row,)).await?;
        let after: Vec<i32> = self.call(table, TABLE, "GetSelectedRows", &()).await?;
        Ok(after == [row])
    }

    /// The names of the elements that label it (AT-SPI's `labelled-by` relation): how a field
    /// without a name of its own is known, wherever its label sits in the tree.
    pub async fn labels(&self, node: &Node) -> Vec<String> {
        /// `ATSPI_RELATION_LABELLED_BY`.
        const LABELLED_BY: u32 = 2;
        let relations: Vec<(u32, Vec<(String, OwnedObjectPath)>)> = self
            .call(node, ACCESSIBLE, "GetRelationSet", &())
            .await
            .unwrap_or_default();
        let mut names = Vec::new();
        for (_, targets) in relations
            .into_iter()
            .filter(|(kind, _)| *kind == LABELLED_BY)
        {
            for (dest, path) in targets {
                let name = self.name(&Node { dest, path }).await;
                if !name.trim().is_empty() {
                    names.push(name.trim().to_owned());
                }
            }
        }
        names
    }

    /// Where it is on the screen: x, y, width, height.
    ///
    /// # Errors
    /// It has no place on the screen, or is gone.
    pub async fn extents(&self, node: &Node) -> Result<(i32, i32, i32, i32), zbus::Error> {
        /// `ATSPI_COORD_TYPE_SCREEN`.
        const SCREEN: u32 = 0;
        self.call(node, "org.a11y.atspi.Component", "GetExtents", &(SCREEN,))
            .await
    }

    /// The middle of it on the screen, where a click by pointer lands.
    ///
    /// # Errors
    /// It is not on the screen (no size), or it does not answer.
    pub async fn center(&self, node: &Node) -> Result<(i32, i32), zbus::Error> {
        let (x, y, width, height) = self.extents(node).await?;
        if width <= 0 || height <= 0 {
            return Err(zbus::Error::Failure(
                "it has no place on the screen".to_owned(),
            ));
        }
        Ok((x + width / 2, y + height / 2))
    }

    /// Clicks at `(x, y)` with the pointer, through the registry's device event controller:
    /// the click reaches the application as the user's own would, through its event loop —
    /// unlike an action, which runs inside the application's accessibility handler, where a
    /// command that opens a modal dialog stops the application answering until the dialog is
    /// closed. It lands on whatever window is on top there.
    ///
    /// # Errors
    /// The registry does not answer.
    pub async fn click_at(&self, x: i32, y: i32) -> Result<(), zbus::Error> {
        let controller = Node {
            dest: REGISTRY.to_owned(),
            path: OwnedObjectPath::try_from("/org/a11y/atspi/registry/deviceeventcontroller")
                .map_err(zbus::Error::from)?,
        };
        self.call::<()>(
            &controller,
            "org.a11y.atspi.DeviceEventController",
            "GenerateMouseEvent",
            &(x, y, "b1c"),
        )
        .await
    }
}
