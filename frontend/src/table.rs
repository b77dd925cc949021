//! The app's data table: a horizontally scrolling wrapper around a table with one header row.

use leptos::prelude::*;

/// A table in its scrolling wrapper (`.table-wrap`): `children` are the header row's cells
/// (`<th>`), `rows` the body (`<tr>`s, or a reactive closure giving them).
#[component]
pub fn DataTable<R>(
    rows: R,
    /// The table's class, for page-specific styling.
    #[prop(optional)]
    class: Option<&'static str>,
    /// The table's `data-testid`, for the browser tests.
    #[prop(optional)]
    testid: Option<&'static str>,
    children: Children,
) -> impl IntoView
where
    R: IntoView + 'static,
{
    view! {
        <div class="table-wrap">
            <table class=class data-testid=testid>
                <thead>
                    <tr>{children()}</tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
    }
}
