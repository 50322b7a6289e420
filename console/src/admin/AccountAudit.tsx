/** An account's audit trail on its page: what was done or refused, when, by whom, from where. */
import { CardTable } from '../ui/card-table.js';
import { when, type AccountData } from './api.js';

export function AccountAudit({ audit }: { audit: AccountData['audit'] }) {
  return (
    <section class="panel" aria-labelledby="audit">
      <h2 id="audit">Audit trail</h2>
      {audit.length === 0 ? (
        <p class="empty">No recorded actions.</p>
      ) : (
        <CardTable
          testId="audit"
          rows={audit}
          row={(e) => ({ key: e.id })}
          columns={[
            { header: 'When', cell: (e) => when(e.at) },
            {
              header: 'What',
              cell: (e) => (
                <>
                  {e.action}
                  {e.outcome === 'refused' && ' (refused)'}
                </>
              ),
            },
            {
              header: 'Who',
              cell: (e) => (
                <>
                  {e.actor.kind}
                  {e.actor.id && <span class="mono"> {e.actor.id}</span>}
                  {e.address && <span class="muted"> from {e.address}</span>}
                </>
              ),
            },
            { header: 'Detail', class: 'wrap', cell: (e) => [e.target, e.detail].filter(Boolean).join(' · ') },
          ]}
        />
      )}
    </section>
  );
}
