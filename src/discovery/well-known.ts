/**
 * The JSON discovery documents (the API catalog, the protected-resource metadata, the A2A agent card, the AI
 * plugin manifest, the MCP server card and catalog, the agent-skills index), built from the site's parts.
 */
import { type Content } from './content.js';
import {
  A2A_PATH,
  A2A_PROTOCOL_VERSION,
  AGENT_SKILLS_SCHEMA,
  MCP_PATH,
  MCP_SERVER_CARD_SCHEMA,
  MEDIA,
  type Parts,
  type Site,
} from './documents.js';
import { sha256Hex } from './document-text.js';

export function serverInfo({ content, url }: Parts): Site['serverInfo'] {
  const { product } = content;
  return { name: product.mcpName, title: product.title, version: content.version, websiteUrl: url('/') };
}

/** RFC 9727 api-catalog linkset. */
export function apiCatalog({ url }: Parts): object {
  return {
    linkset: [
      {
        anchor: url('/'),
        'service-desc': [{ href: url('/openapi.json'), type: 'application/json' }],
        'service-doc': [{ href: url('/api-docs'), type: 'text/html' }],
        status: [{ href: url('/healthz'), type: 'application/json' }],
      },
    ],
  };
}

export function oauthProtectedResource({ content, base, url }: Parts): object {
  return {
    resource: base,
    bearer_methods_supported: ['header'],
    resource_name: `${content.product.name} API`,
    resource_documentation: url('/auth.md'),
  };
}

/** A2A agent card. */
export function agentCard({ content, url }: Parts): object {
  const { product } = content;
  return {
    protocolVersion: A2A_PROTOCOL_VERSION,
    name: product.name,
    description: product.summary,
    url: url(A2A_PATH),
    preferredTransport: 'JSONRPC',
    additionalInterfaces: [{ url: url(A2A_PATH), transport: 'JSONRPC' }],
    version: content.version,
    provider: { organization: product.organization, url: url('/') },
    iconUrl: url('/logo.svg'),
    documentationUrl: url('/llms-full.txt'),
    capabilities: { streaming: false, pushNotifications: false, stateTransitionHistory: false },
    defaultInputModes: ['text/plain'],
    defaultOutputModes: ['text/plain', 'text/markdown'],
    skills: content.topics.map((topic) => ({
      id: topic.id,
      name: topic.name,
      description: topic.description,
      tags: topic.tags,
      examples: topic.examples,
    })),
    supportsAuthenticatedExtendedCard: false,
  };
}

export function aiPlugin({ content, url }: Parts): object {
  const { product } = content;
  return {
    schema_version: 'v1',
    name_for_human: product.name,
    name_for_model: product.modelName,
    description_for_human: product.pluginDescription,
    description_for_model: product.modelDescription,
    auth: { type: 'user_http', authorization_type: 'bearer' },
    api: { type: 'openapi', url: url('/openapi.json'), is_user_authenticated: false },
    logo_url: url('/logo.svg'),
    contact_email: product.contactEmail,
    legal_info_url: url('/legal.md'),
  };
}

/** MCP server card. */
export function serverCard(parts: Parts, info: Site['serverInfo']): object {
  const { url } = parts;
  return {
    $schema: MCP_SERVER_CARD_SCHEMA,
    name: info.name,
    title: info.title,
    version: info.version,
    description: parts.content.product.tagline,
    websiteUrl: info.websiteUrl,
    icons: [{ src: url('/logo.svg'), mimeType: 'image/svg+xml', sizes: ['any'] }],
    remotes: [{ type: 'streamable-http', url: url(MCP_PATH), supportedProtocolVersions: parts.mcpProtocolVersions }],
  };
}

export function aiCatalog({ content, base, url }: Parts): object {
  const { product } = content;
  const host = new URL(base).hostname;
  return {
    specVersion: 'draft',
    entries: [
      {
        identifier: `urn:air:${host}:${product.mcpName.split('/')[1]}`,
        displayName: product.title,
        type: MEDIA.serverCard,
        url: url('/mcp/server-card'),
      },
    ],
  };
}

export function skillPath(content: Content): string {
  return `/.well-known/agent-skills/${content.product.skillName}/SKILL.md`;
}

export function skillsIndex({ content }: Parts, skill: string): object {
  const { product } = content;
  return {
    $schema: AGENT_SKILLS_SCHEMA,
    skills: [
      {
        name: product.skillName,
        type: 'skill-md',
        description: product.agentSkillDescription,
        url: skillPath(content),
        digest: `sha256:${sha256Hex(skill)}`,
      },
    ],
  };
}
