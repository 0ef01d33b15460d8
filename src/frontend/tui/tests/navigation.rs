//! Moving around: filter and sort, `:` commands and their completion, namespace
//! favourites, and the history's columns.

use super::*;

#[test]
fn filter_and_sort() {
    let mut app = app(false);
    press(&mut app, "/");
    press(&mut app, "data");
    app.on_key(code(KeyCode::Enter));
    let names: Vec<_> = app
        .table
        .rows
        .iter()
        .map(|r| r.id.key.name.as_str())
        .collect();
    assert_eq!(names, ["cache", "queue"]);
    app.on_key(code(KeyCode::Esc));
    assert_eq!(app.table.rows.len(), 6);
    press(&mut app, "o");
    assert_eq!(
        app.table.rows[0].id.key.name, "worker",
        "failed first when sorted by state"
    );
    press(&mut app, "O");
    assert_eq!(app.table.rows[0].id.key.name, "web");
}

#[test]
fn commands_switch_namespace_and_context() {
    let mut app = app(false);
    let all = app.table.rows.len();
    press(&mut app, ":");
    press(&mut app, "ns data");
    // Only a view filter: the engine (and its coverage) stays as it is; data joins the
    // favourites.
    let effects = app.on_key(code(KeyCode::Enter));
    assert!(
        matches!(&effects[..], [Effect::SaveFavourites(f)] if f.of("prod-eu") == ["data"]),
        "{effects:?}"
    );
    assert_eq!(app.scope, Scope::Namespace("data".into()));
    assert!(app.table.rows.iter().all(|r| r.id.key.namespace == "data"));
    assert!(app.table.rows.len() < all);
    assert_eq!(app.coverage.scope, Scope::All);
    assert!(app.run_command("ns all").is_empty());
    assert_eq!(app.table.rows.len(), all);
    assert_eq!(
        app.run_command("ctx staging"),
        vec![Effect::SwitchContext("staging".into())]
    );
    assert!(app.run_command("frobnicate").is_empty());
    assert!(matches!(
        app.status.feedback.last().unwrap().progress,
        Progress::Failed(_)
    ));
}

#[test]
fn a_namespace_engine_refuses_views_it_cannot_show() {
    let mut app = app(false);
    app.coverage = crate::engine::Coverage::new(Scope::Namespace("apps".into()), None);
    app.scope = Scope::Namespace("apps".into());
    assert!(app.run_command("ns data").is_empty());
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    let Progress::Failed(why) = &app.status.feedback.last().unwrap().progress else {
        panic!("refused")
    };
    assert!(why.contains("reconciles) namespace apps only"), "{why}");
}

#[test]
fn history_columns_line_up_whatever_the_widths() {
    let mut app = app(false);
    let mut views = (*app.views).clone();
    let view = views.get_mut(&k("apps", "api")).unwrap();
    let hr = std::sync::Arc::make_mut(&mut view.release);
    let history = &mut hr.status.as_mut().unwrap().history;
    history[0].status = "pending-rollback".into();
    history[0].chart_name = "a-much-longer-chart-name".into();
    app.set_views(std::sync::Arc::new(views));
    select(&mut app, "api");
    app.on_key(key('h'));
    app.on_io(IoResult::Detail {
        key: RowKey::wheelhouse(k("apps", "api")),
        data: Box::new(detail_data()),
    });
    let screen = render(&app, 120, 30).backend().to_string();
    let column = |l: &str, what: &str| l.find(what).map(|b| l[..b].chars().count());
    let digests: Vec<usize> = screen
        .lines()
        .filter_map(|l| column(l, "sha256:"))
        .collect();
    assert!(digests.len() >= 2, "{screen}");
    assert!(digests.windows(2).all(|w| w[0] == w[1]), "{screen}");
    let header = screen
        .lines()
        .find_map(|l| column(l, "DIGEST"))
        .expect("a header");
    assert_eq!(header, digests[0], "{screen}");
}

/// The command line's text.
fn command_text(app: &App) -> String {
    match &app.overlay {
        Some(Overlay::Command(line)) => line.text.lines().concat(),
        _ => panic!("no command line"),
    }
}

#[test]
fn number_keys_switch_the_view_to_favourites_and_0_shows_all() {
    let mut app = app(false);
    for ns in ["data", "apps"] {
        press(&mut app, ":");
        press(&mut app, &format!("ns {ns}"));
        let effects = app.on_key(code(KeyCode::Enter));
        assert!(
            matches!(&effects[..], [Effect::SaveFavourites(_)]),
            "{effects:?}"
        );
    }
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    // Only the view filter: no effect at all (no engine restart, and data keeps key 1).
    assert!(press(&mut app, "1").is_empty());
    assert_eq!(app.scope, Scope::Namespace("data".into()));
    assert!(app.table.rows.iter().all(|r| r.id.key.namespace == "data"));
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    assert!(press(&mut app, "0").is_empty());
    assert_eq!(app.scope, Scope::All);
    assert_eq!(app.table.rows.len(), 6);
    press(&mut app, "2");
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    // No favourite 5 yet: a notice, and the view stays.
    assert!(press(&mut app, "5").is_empty());
    assert_eq!(app.scope, Scope::Namespace("apps".into()));
    assert!(
        app.status
            .feedback
            .last()
            .unwrap()
            .what
            .contains("no namespace on 5")
    );
    // A namespace nobody knows (a typo) is shown but never becomes a favourite.
    assert!(app.run_command("ns dta").is_empty());
    assert_eq!(app.scope, Scope::Namespace("dta".into()));
    assert_eq!(app.favourites.of("prod-eu"), ["data", "apps"]);
    // The start namespace joins them, and the completions load.
    let mut fresh = App::new(
        "prod-eu".into(),
        Scope::Namespace("kube-system".into()),
        false,
        Theme::builtin("dark").unwrap(),
        demo::now(),
    );
    fresh.set_favourites(Ok(app.favourites.clone()));
    let effects = fresh.on_start();
    assert!(
        matches!(&effects[..], [Effect::SaveFavourites(f), Effect::LoadCompletions, Effect::LoadUser]
            if f.of("prod-eu") == ["data", "apps", "kube-system"]),
        "{effects:?}"
    );
}

#[test]
fn favourites_row_fits_80_columns_beside_the_read_only_header() {
    let mut app = app(true);
    app.cluster_namespaces = (1..=9).map(|i| format!("team-{i}-services")).collect();
    for ns in app.cluster_namespaces.clone() {
        app.run_command(&format!("ns {ns}"));
    }
    press(&mut app, "3");
    assert_eq!(app.scope, Scope::Namespace("team-3-services".into()));
    let screen = render(&app, 80, 24).backend().to_string();
    let lines: Vec<&str> = screen.lines().collect();
    assert!(lines[0].contains("ctx prod-eu"), "{screen}");
    assert!(lines[0].contains("[READ-ONLY]"), "{screen}");
    assert!(lines[1].contains("<0> all"), "{screen}");
    assert!(lines[1].contains("<3> [team-3-services]"), "{screen}");
    assert!(lines[1].contains('…'), "cut, not wrapped:\n{screen}");
    insta::assert_snapshot!(screen);
}

#[test]
fn command_line_completes_namespaces_and_contexts_with_tab() {
    let mut app = app(false);
    let tab = code(KeyCode::Tab);
    assert_eq!(press(&mut app, ":"), vec![Effect::LoadCompletions]);
    // Not allowed to list namespaces: no notice, the releases' namespaces complete.
    let notices = app.status.feedback.len();
    app.on_io(IoResult::Namespaces(Err("namespaces is forbidden".into())));
    assert_eq!(app.status.feedback.len(), notices);
    assert_eq!(app.completions("ns ").matches, ["all", "apps", "data"]);
    app.on_io(IoResult::Namespaces(Ok(vec![
        "apps".into(),
        "data".into(),
        "default".into(),
        "kube-system".into(),
    ])));
    app.on_io(IoResult::Contexts(vec![
        "prod-eu".into(),
        "prod-us".into(),
        "staging".into(),
    ]));
    press(&mut app, "ns d");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data");
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(
        screen.contains("namespaces: [data] default"),
        "suggestion line:\n{screen}"
    );
    insta::assert_snapshot!(screen);
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns default");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data", "tab cycles");
    // Typing ends the cycle: completions start again from the new text.
    app.on_key(code(KeyCode::Backspace));
    app.on_key(code(KeyCode::Backspace));
    app.on_key(code(KeyCode::Backspace));
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns data");
    app.on_key(code(KeyCode::Enter));
    assert_eq!(app.scope, Scope::Namespace("data".into()));

    press(&mut app, ":");
    press(&mut app, "c");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ctx ", "the one command, then a space");
    press(&mut app, "prod");
    app.on_key(tab);
    app.on_key(tab);
    assert_eq!(command_text(&app), "ctx prod-us");
    assert_eq!(
        app.on_key(code(KeyCode::Enter)),
        vec![Effect::SwitchContext("prod-us".into())]
    );
    // Nothing matches: said on the suggestion line, tab leaves the text alone.
    press(&mut app, ":");
    press(&mut app, "ns zz");
    app.on_key(tab);
    assert_eq!(command_text(&app), "ns zz");
    let screen = render(&app, 80, 24).backend().to_string();
    assert!(
        screen.contains("no namespace starts with \"zz\""),
        "{screen}"
    );
}

#[test]
fn favourites_that_cannot_be_read_or_saved_are_a_notice_once() {
    let mut app = app(false);
    app.set_favourites(Err("favourites.yaml: permission denied".into()));
    let Progress::Failed(e) = &app.status.feedback.last().unwrap().progress else {
        panic!("a notice")
    };
    assert!(e.contains("permission denied"));
    let notices = app.status.feedback.len();
    for _ in 0..2 {
        app.on_io(IoResult::FavouritesSaved(Err(
            "read-only file system".into()
        )));
    }
    assert_eq!(app.status.feedback.len(), notices + 1, "said once");
    assert!(app.status_notice().unwrap().1.contains("not saved"));
}
