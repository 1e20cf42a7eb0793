/**
 * A stub of the part of the `vscode` API the extension uses, so its unit tests run under
 * `node --test` without downloading VS Code. The test build aliases `vscode` to this file.
 * It records what the extension does (commands, messages posted to webviews, decorations,
 * documents opened, status bar text) and lets a test script the user's answers.
 */

type Listener<T> = (e: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => void = () => {}) {}
  static from(...items: { dispose(): unknown }[]): Disposable {
    return new Disposable(() => items.forEach((d) => d.dispose()));
  }
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners: Listener<T>[] = [];
  event = (fn: Listener<T>): Disposable => {
    this.listeners.push(fn);
    return new Disposable(() => { this.listeners = this.listeners.filter((l) => l !== fn); });
  };
  fire(e: T): void {
    for (const l of [...this.listeners]) l(e);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export class Uri {
  private constructor(readonly scheme: string, readonly authority: string, readonly path: string,
    readonly query = "", readonly fragment = "") {}
  static file(p: string): Uri { return new Uri("file", "", p); }
  static parse(s: string): Uri {
    const u = new URL(s);
    return new Uri(u.protocol.replace(/:$/, ""), u.host, decodeURIComponent(u.pathname), u.search.replace(/^\?/, ""));
  }
  static from(c: { scheme: string; authority?: string; path?: string; query?: string }): Uri {
    return new Uri(c.scheme, c.authority ?? "", c.path ?? "", c.query ?? "");
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, base.authority, [base.path.replace(/\/$/, ""), ...parts].join("/"));
  }
  get fsPath(): string { return this.path; }
  with(c: { scheme?: string; path?: string }): Uri { return new Uri(c.scheme ?? this.scheme, this.authority, c.path ?? this.path); }
  toString(): string {
    return `${this.scheme}:${this.authority || this.scheme === "file" ? "//" + this.authority : ""}${this.path}${this.query ? "?" + this.query : ""}`;
  }
}

export class Position {
  constructor(readonly line: number, readonly character: number) {}
}
export class Range {
  readonly start: Position;
  readonly end: Position;
  constructor(a: number | Position, b: number | Position, c?: number, d?: number) {
    this.start = typeof a === "number" ? new Position(a, b as number) : a;
    this.end = typeof a === "number" ? new Position(c as number, d as number) : (b as Position);
  }
}
export class Selection extends Range {
  constructor(anchor: Position, active: Position) {
    super(anchor, active);
  }
  get active(): Position { return this.end; }
  get anchor(): Position { return this.start; }
}
export class MarkdownString {
  isTrusted: unknown = false;
  constructor(public value = "") {}
}
export class Hover {
  constructor(readonly contents: MarkdownString, readonly range?: Range) {}
}
export class ThemeColor {
  constructor(readonly id: string) {}
}
export enum DiagnosticSeverity { Error = 0, Warning = 1, Information = 2, Hint = 3 }
export class Diagnostic {
  source?: string;
  constructor(readonly range: Range, readonly message: string, readonly severity = DiagnosticSeverity.Error) {}
}
export enum ViewColumn { Active = -1, Beside = -2, One = 1, Two = 2 }
export enum StatusBarAlignment { Left = 1, Right = 2 }
export enum OverviewRulerLane { Left = 1, Center = 2, Right = 4, Full = 7 }
export enum TextEditorRevealType { Default = 0, InCenter = 1, InCenterIfOutsideViewport = 2, AtTop = 3 }

// ---- documents and editors -----------------------------------------------------------

export class TextDocument {
  constructor(readonly uri: Uri, private text: string, public languageId = "python") {}
  getText(): string { return this.text; }
  get lineCount(): number { return this.text.split("\n").length; }
  lineAt(n: number): { text: string } { return { text: this.text.split("\n")[n] ?? "" }; }
  setText(text: string): void { this.text = text; }
}

export class TextEditor {
  selection: Selection = new Selection(new Position(0, 0), new Position(0, 0));
  readonly decorations = new Map<object, Range[]>();
  revealed: Range[] = [];
  constructor(readonly document: TextDocument, public viewColumn = ViewColumn.One) {}
  get selections(): Selection[] { return [this.selection]; }
  setDecorations(type: object, ranges: Range[]): void { this.decorations.set(type, ranges); }
  revealRange(r: Range): void { this.revealed.push(r); }
  /** Lines (1-based) that carry any decoration of the given types. */
  decoratedLines(types: object[]): number[] {
    const lines = new Set<number>();
    for (const t of types) for (const r of this.decorations.get(t) ?? []) lines.add(r.start.line + 1);
    return [...lines].sort((a, b) => a - b);
  }
}

// ---- what a test sets up and reads back -------------------------------------------------

export const stub = {
  commands: new Map<string, (...args: unknown[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  settings: {} as Record<string, unknown>,
  /** Answers for showInputBox, in order; undefined = the user pressed Escape. */
  inputAnswers: [] as (string | undefined)[],
  inputPrompts: [] as { prompt?: string; value?: string; title?: string }[],
  quickPickAnswers: [] as number[],
  messages: [] as { level: string; text: string }[],
  panels: [] as WebviewPanel[],
  serializers: new Map<string, { deserializeWebviewPanel(p: WebviewPanel, s: unknown): unknown }>(),
  providers: new Map<string, { provideTextDocumentContent(u: Uri): string }>(),
  hoverProviders: [] as { provideHover(d: TextDocument, p: Position): unknown }[],
  documents: [] as TextDocument[],
  editors: [] as TextEditor[],
  shown: [] as TextEditor[],
  statusItems: [] as StatusBarItem[],
  decorationTypes: [] as DecorationType[],
  clipboard: "",
  diagnostics: new Map<string, Map<string, Diagnostic[]>>(),
  opened: [] as string[],
  selectionEmitter: new EventEmitter<{ textEditor: TextEditor; selections: Selection[] }>(),
  visibleEmitter: new EventEmitter<TextEditor[]>(),
  reset(): void {
    this.commands.clear(); this.executed = []; this.settings = {}; this.inputAnswers = [];
    this.inputPrompts = []; this.quickPickAnswers = []; this.messages = []; this.panels = [];
    this.serializers.clear(); this.providers.clear(); this.hoverProviders = []; this.documents = [];
    this.editors = []; this.shown = []; this.statusItems = []; this.decorationTypes = []; this.opened = [];
    this.diagnostics.clear();
    window.activeTextEditor = undefined;
  },
  /** Opens `text` as a file in an editor and makes it the active one. */
  openEditor(path: string, text: string): TextEditor {
    const doc = new TextDocument(Uri.file(path), text);
    this.documents.push(doc);
    const editor = new TextEditor(doc);
    this.editors.push(editor);
    window.activeTextEditor = editor;
    return editor;
  },
};

export class DecorationType {
  constructor(readonly options: Record<string, unknown>) { stub.decorationTypes.push(this); }
  dispose(): void {}
}

export class StatusBarItem {
  text = "";
  tooltip: string | undefined;
  command: string | undefined;
  backgroundColor: ThemeColor | undefined;
  visible = false;
  show(): void { this.visible = true; }
  hide(): void { this.visible = false; }
  dispose(): void {}
}

export class Webview {
  html = "";
  options: Record<string, unknown> = {};
  readonly cspSource = "https://stub.vscode-cdn.net";
  readonly posted: unknown[] = [];
  readonly received = new EventEmitter<unknown>();
  onDidReceiveMessage = this.received.event;
  asWebviewUri(uri: Uri): Uri { return Uri.from({ scheme: "https", authority: "stub.vscode-cdn.net", path: uri.path }); }
  async postMessage(m: unknown): Promise<boolean> { this.posted.push(JSON.parse(JSON.stringify(m))); return true; }
  /** What the webview script would send. */
  send(m: unknown): void { this.received.fire(m); }
}

export class WebviewPanel {
  readonly webview = new Webview();
  visible = true;
  disposed = false;
  iconPath: unknown;
  private disposeEmitter = new EventEmitter<void>();
  private viewState = new EventEmitter<unknown>();
  onDidDispose = this.disposeEmitter.event;
  onDidChangeViewState = this.viewState.event;
  constructor(readonly viewType: string, public title: string, readonly options: Record<string, unknown>) {
    this.webview.options = options;
    stub.panels.push(this);
  }
  reveal(): void { this.visible = true; }
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.disposeEmitter.fire();
  }
}

export const window = {
  activeTextEditor: undefined as TextEditor | undefined,
  get visibleTextEditors(): TextEditor[] { return stub.editors; },
  createOutputChannel: (_name: string) => ({ lines: [] as string[], appendLine(s: string) { this.lines.push(s); }, dispose() {} }),
  createStatusBarItem: () => { const item = new StatusBarItem(); stub.statusItems.push(item); return item; },
  createTextEditorDecorationType: (options: Record<string, unknown>) => new DecorationType(options),
  createWebviewPanel: (viewType: string, title: string, _column: unknown, options: Record<string, unknown>) =>
    new WebviewPanel(viewType, title, options),
  registerWebviewPanelSerializer: (viewType: string, s: { deserializeWebviewPanel(p: WebviewPanel, s: unknown): unknown }) => {
    stub.serializers.set(viewType, s);
    return new Disposable(() => stub.serializers.delete(viewType));
  },
  showInputBox: async (o: { prompt?: string; value?: string; title?: string; validateInput?: (v: string) => string | null }) => {
    stub.inputPrompts.push({ prompt: o.prompt, value: o.value, title: o.title });
    const answer = stub.inputAnswers.length ? stub.inputAnswers.shift() : o.value;
    if (answer !== undefined && o.validateInput?.(answer)) throw new Error(`invalid input in a test: ${answer}`);
    return answer;
  },
  showQuickPick: async <T>(items: T[]) => items[stub.quickPickAnswers.shift() ?? 0],
  showErrorMessage: async (text: string) => { stub.messages.push({ level: "error", text }); return undefined; },
  showWarningMessage: async (text: string, ...items: string[]) => { stub.messages.push({ level: "warning", text }); return items[0]; },
  showInformationMessage: async (text: string) => { stub.messages.push({ level: "info", text }); return undefined; },
  showTextDocument: async (doc: TextDocument, _opts?: unknown) => {
    let editor = stub.editors.find((e) => e.document === doc);
    if (!editor) { editor = new TextEditor(doc, ViewColumn.Two); stub.editors.push(editor); }
    stub.shown.push(editor);
    return editor;
  },
  onDidChangeVisibleTextEditors: stub.visibleEmitter.event,
  onDidChangeTextEditorSelection: stub.selectionEmitter.event,
};

export const workspace = {
  workspaceFolders: undefined as { uri: Uri }[] | undefined,
  getConfiguration: (section: string) => ({
    get: <T>(key: string, fallback?: T): T => (stub.settings[`${section}.${key}`] as T) ?? (fallback as T),
  }),
  getWorkspaceFolder: (_uri: Uri) => undefined,
  asRelativePath: (uri: Uri) => uri.path.split("/").pop() ?? uri.path,
  registerTextDocumentContentProvider: (scheme: string, p: { provideTextDocumentContent(u: Uri): string }) => {
    stub.providers.set(scheme, p);
    return new Disposable(() => stub.providers.delete(scheme));
  },
  openTextDocument: async (arg: Uri | { content: string; language: string }) => {
    if (arg instanceof Uri) {
      const existing = stub.documents.find((d) => d.uri.toString() === arg.toString());
      if (existing) return existing;
      const provider = stub.providers.get(arg.scheme);
      if (!provider) throw new Error(`no document ${arg.toString()}`);
      const ext = arg.path.split(".").pop();
      const doc = new TextDocument(arg, provider.provideTextDocumentContent(arg), ext === "cpp" ? "cpp" : "python");
      stub.documents.push(doc);
      return doc;
    }
    const doc = new TextDocument(Uri.from({ scheme: "untitled", path: `Untitled-${stub.documents.length + 1}` }), arg.content, arg.language);
    stub.documents.push(doc);
    return doc;
  },
  fs: { stat: async (_uri: Uri) => { throw new Error("no such file"); } },
};

export const languages = {
  registerHoverProvider: (_selector: unknown, p: { provideHover(d: TextDocument, p: Position): unknown }) => {
    stub.hoverProviders.push(p);
    return new Disposable();
  },
  createDiagnosticCollection: (name: string) => {
    const entries = new Map<string, Diagnostic[]>();
    stub.diagnostics.set(name, entries);
    return {
      set: (uri: Uri, list: Diagnostic[]) => entries.set(uri.toString(), list),
      clear: () => entries.clear(),
      dispose: () => entries.clear(),
    };
  },
  setTextDocumentLanguage: async (doc: TextDocument, language: string) => { doc.languageId = language; return doc; },
};

export const commands = {
  registerCommand: (id: string, fn: (...args: unknown[]) => unknown) => {
    stub.commands.set(id, fn);
    return new Disposable(() => stub.commands.delete(id));
  },
  executeCommand: async (id: string, ...args: unknown[]) => {
    stub.executed.push({ id, args });
    const fn = stub.commands.get(id);
    return fn ? fn(...args) : undefined;
  },
};

export const env = {
  clipboard: { writeText: async (s: string) => { stub.clipboard = s; } },
  openExternal: async (uri: Uri) => { stub.opened.push(uri.toString()); return true; },
};

/** A minimal ExtensionContext. */
export function makeContext(extensionPath = "/ext"): {
  subscriptions: { dispose(): unknown }[]; extensionUri: Uri; workspaceState: Memento; globalState: Memento;
} {
  return { subscriptions: [], extensionUri: Uri.file(extensionPath), workspaceState: new Memento(), globalState: new Memento() };
}

export class Memento {
  private data = new Map<string, unknown>();
  get<T>(key: string, fallback?: T): T { return (this.data.has(key) ? this.data.get(key) : fallback) as T; }
  async update(key: string, value: unknown): Promise<void> { this.data.set(key, JSON.parse(JSON.stringify(value))); }
  keys(): string[] { return [...this.data.keys()]; }
}
