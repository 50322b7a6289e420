/**
 * Checks every response a test provokes against the server's own /openapi.json: the status must be declared
 * for the operation and the body must validate against the declared schema (ajv, JSON Schema 2020-12).
 */
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';
import { api, type ApiResponse } from './api.js';

type OpenApiDocument = { paths: Record<string, Record<string, { responses: Record<string, any> }>> };

const escape = (pointer: string) => pointer.replace(/~/g, '~0').replace(/\//g, '~1');

export class Conformance {
  private readonly ajv: Ajv2020;
  private readonly templates: { template: string; regex: RegExp }[];
  readonly checked: string[] = [];

  constructor(readonly document: OpenApiDocument) {
    this.ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
    addFormats.default(this.ajv);
    this.ajv.addSchema(document as object, 'openapi.json');
    // Literal paths first, so /api/backups/upload is not taken for /api/backups/{id}.
    const params = (template: string) => template.split('{').length;
    this.templates = Object.keys(document.paths)
      .sort((a, b) => params(a) - params(b))
      // An empty segment is still that parameter (`/api/backups/` is GET /api/backups/{id} with a malformed id).
      .map((template) => ({ template, regex: new RegExp(`^${template.replace(/\{[^}]+\}/g, '[^/]*')}$`) }));
  }

  static async load(baseUrl: string): Promise<Conformance> {
    const response = await fetch(`${baseUrl}/openapi.json`);
    return new Conformance((await response.json()) as OpenApiDocument);
  }

  /** The operation template for a concrete path, or undefined for paths the API does not have. */
  templateOf(path: string): string | undefined {
    const bare = path.split('?')[0]!;
    return this.templates.find((t) => t.regex.test(bare))?.template;
  }

  check(method: string, path: string, response: Pick<ApiResponse, 'status' | 'headers' | 'body'>): void {
    const template = this.templateOf(path);
    const operation = template ? this.document.paths[template]![method.toLowerCase()] : undefined;
    if (!operation) {
      // Unknown routes and methods: docs/api-rules.md#statuses allows 404/405 with an ErrorResponse.
      expect([404, 405], `${method} ${path} is not an operation`).toContain(response.status);
      this.validate('#/components/schemas/ErrorResponse', response.body, `${method} ${path}`);
      return;
    }
    const declared = operation.responses[String(response.status)];
    expect(declared, `${method} ${template} answered ${response.status}, which is not declared`).toBeDefined();
    const contentType = (response.headers.get('content-type') ?? '').split(';')[0]!.trim();
    const media = declared.content?.[contentType];
    expect(media, `${method} ${template} ${response.status}: content type ${contentType} not declared`).toBeDefined();
    if (contentType === 'application/json') {
      const pointer = `openapi.json#/paths/${escape(template!)}/${method.toLowerCase()}/responses/${response.status}/content/application~1json/schema`;
      this.validate(pointer, response.body, `${method} ${template} ${response.status}`);
    }
    this.checked.push(`${method} ${template} ${response.status}`);
  }

  validate(ref: string, body: unknown, label: string): void {
    const fullRef = ref.startsWith('#') ? `openapi.json${ref}` : ref;
    const validator = this.ajv.getSchema(fullRef) ?? this.ajv.compile({ $ref: fullRef });
    const ok = validator(body);
    expect(ok, `${label}: ${this.ajv.errorsText(validator.errors)}\n${JSON.stringify(body)}`).toBe(true);
  }
}

/** Like api(), but every response is checked for conformance before it is returned. */
export function conformantApi(baseUrl: string, conformance: Conformance, apiKey?: string) {
  const call = api(baseUrl, apiKey);
  return async function checkedCall<T = any>(
    method: string,
    path: string,
    options: Parameters<typeof call>[2] = {},
  ): Promise<ApiResponse<T>> {
    const response = await call<T>(method, path, options);
    conformance.check(method, path, response);
    return response;
  };
}
