import { PLANS } from '../../../src/domain/plans.js';

/** One `<option>` per plan, for a plan `<select>`. */
export function PlanOptions() {
  return (
    <>
      {PLANS.map((plan) => (
        <option key={plan} value={plan}>
          {plan}
        </option>
      ))}
    </>
  );
}
