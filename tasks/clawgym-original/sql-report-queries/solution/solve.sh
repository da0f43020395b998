set -e
mkdir -p queries
cat > queries/top_customers_q3.sql <<'SQL'
SELECT c.name AS customer_name,
       COUNT(DISTINCT o.id) AS orders,
       ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue
FROM orders o
JOIN customers c ON c.id = o.customer_id
JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid' AND o.ordered_at BETWEEN '2026-07-01' AND '2026-09-30'
GROUP BY c.id
ORDER BY revenue DESC, customer_name
LIMIT 3;
SQL
cat > queries/monthly_revenue.sql <<'SQL'
SELECT substr(o.ordered_at, 1, 7) AS month,
       COUNT(DISTINCT o.id) AS paid_orders,
       ROUND(SUM(i.quantity * i.unit_price), 2) AS revenue
FROM orders o
JOIN order_items i ON i.order_id = o.id
WHERE o.status = 'paid'
GROUP BY month
ORDER BY month;
SQL
