//! `getTodo`, `startTodoItem`: parse, call [`byre_app::todo`], answer.

use actix_web::{web, HttpResponse};
use serde::Deserialize;

use super::identity::Caller;
use super::{ApiError, App};
use byre_app::todo as op;

/// `getTodo` — GET /api/projects/{projectId}/todo → 200 `Todo` (the items of TODO.md at the
/// root of the default branch's tip, `exists: false` when there is none); 404 unknown project;
/// 400 for a TODO.md over 1 MiB or that is not a file. See [`op::get_todo`].
pub async fn get_todo(
    _caller: Caller,
    project_id: web::Path<String>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(op::get_todo(&app, &project_id).await?))
}

/// Body of `startTodoItem` (spec `TodoStart`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TodoStart {
    title: String,
    #[serde(default, deserialize_with = "crate::http::absent_or")]
    model: Option<String>,
    #[serde(default)]
    discuss: bool,
}

/// `startTodoItem` — POST /api/projects/{projectId}/todo/tasks → 201 `Task` with `todo_item`,
/// its agent started on the item; 400 (no such item, bad model), 404 (unknown project), 409
/// (another active task has the item). See [`op::start_todo_item`].
pub async fn start_todo_item(
    caller: Caller,
    project_id: web::Path<String>,
    body: web::Json<TodoStart>,
    app: web::Data<App>,
) -> Result<HttpResponse, ApiError> {
    let b = body.into_inner();
    let start = op::TodoStart {
        title: b.title,
        model: b.model,
        discuss: b.discuss,
    };
    let task = op::start_todo_item(&app, &caller.login, &project_id, start).await?;
    Ok(HttpResponse::Created().json(task))
}
